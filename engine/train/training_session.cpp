#include "engine/train/training_session.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>

#include "engine/backend/device_footprint.h"
#include "engine/backend/profiled_backend.h"
#include "engine/comm/device_comm.h"
#include "engine/comm/flight_dumps.h"
#include "engine/comm/flight_frames.h"
#include "engine/comm/flight_recorder.h"
#include "engine/comm/mpi_comm.h"
#include "common/core/check.h"
#include "common/settings/input_files.h"
#include "common/core/writable_file.h"
#include "engine/parallel/injected_hang.h"
#include "engine/train/metrics.h"
#include "engine/train/profiling.h"
#include "engine/train/safetensors.h"
#include "engine/train/trainer.h"
#include "profiler/record/clock.h"
#include "profiler/record/recorder.h"
#include "profiler/record/zones.h"
#include "profiler/transport/trace_file.h"

namespace us {

namespace {

// One line per step on a terminal (redrawn in place), every ~5% of the run otherwise.
class Progress {
public:
    Progress(int total, bool quiet) : m_total(total), m_quiet(quiet), m_tty(isatty(fileno(stderr))) {}
    void update(const StepMetrics& m) {
        if (m_quiet) return;
        const int every = std::max(1, m_total / 20);
        if (!m_tty && m.step % every != 0 && m.step != 1 && m.step != m_total) return;
        const int width = 24;
        const int filled = m_total > 0 ? int(double(m.step) / m_total * width) : width;
        const std::string bar = std::string(size_t(filled), '=') + std::string(size_t(width - filled), ' ');
        std::fprintf(stderr, "%sstep %*d/%d [%s] loss %.4f | lr %.2e | %6.0f tok/s | %6.1f ms/step | peak %s%s",
                     m_tty ? "\r" : "", int(std::to_string(m_total).size()), m.step, m_total, bar.c_str(), m.loss, m.lr,
                     m.tokens_per_s, m.step_ms, format_bytes(m.memory.total_peak).c_str(), m_tty ? "\033[K" : "\n");
        std::fflush(stderr);
    }
    void finish() {
        if (m_tty && !m_quiet) std::fprintf(stderr, "\n");
    }

private:
    int m_total;
    bool m_quiet;
    bool m_tty;
};

void print_summary(const Trainer& trainer, const std::vector<StepMetrics>& history, double seconds) {
    const TrainConfig& c = trainer.config();
    if (history.empty()) return;
    // Throughput: the tokens of the steady steps (all but the first, which warms caches up and allocates the
    // optimizer state) over their wall time, each step's the slowest rank's: the report's definition.
    double tokens = 0, ms = 0;
    int counted = 0;
    for (size_t i = history.size() > 1 ? 1 : 0; i < history.size(); ++i) {
        tokens += double(history[i].tokens);
        ms += history[i].step_ms;
        ++counted;
    }
    MemoryStats peak{};
    for (const auto& m : history)
        for (int k = 0; k < kMemCategoryCount; ++k) peak.peak[k] = std::max(peak.peak[k], m.memory.peak[k]);
    for (const auto& m : history) peak.total_peak = std::max(peak.total_peak, m.memory.total_peak);
    std::printf("\nTrained %d steps in %.1f s: loss %.4f (step %d) -> %.4f (step %d)\n", int(history.size()), seconds,
                history.front().loss, history.front().step, history.back().loss, history.back().step);
    std::printf(
        "Throughput (measured over the %d steady step(s), the slowest rank's time): %.0f tokens/s, %.1f "
        "ms/step\n",
        counted, tokens / (ms / 1e3), ms / counted);
    if (c.model.is_moe())
        std::printf(
            "Model: %lld parameters, %lld active per token (formula: dense blocks 12h^2 + 13h, MoE blocks "
            "4h^2 + 8h + hE + E(8h^2 + 5h) with K of the E experts active), ",
            (long long)c.model.num_params(), (long long)c.model.active_params());
    else
        std::printf("Model: %lld parameters (formula: N = h*v + L*(12h^2 + 13h) + 2h), ",
                    (long long)c.model.num_params());
    std::printf("%s, recompute %s, micro-batch %d x %d tokens, %d micro-batch(es) per step\n",
                std::string(precision_name(c.precision)).c_str(), std::string(recompute_name(c.recompute)).c_str(),
                c.batch, c.model.seq, c.grad_accum);
    if (c.model.is_moe()) {  // routing over the run, measured
        int64_t dropped = 0, choices = 0;
        double balance = 0;
        for (const StepMetrics& m : history) {
            dropped += m.moe_dropped;
            balance += m.moe_balance;
            for (const auto& layer : m.moe_routed)  // every choice, the dropped ones too
                for (int64_t n : layer.second) choices += n;
        }
        std::printf(
            "Experts (measured): %d of %d per token; balance E*sum(f*P) %.3f (mean; 1 is even, %d all on one "
            "expert); %lld of %lld choices dropped beyond capacity\n",
            c.model.moe_topk, c.model.moe_experts, balance / double(history.size()), c.model.moe_experts,
            (long long)dropped, (long long)choices);
    }
    std::printf("Peak memory by category (measured by the tracked allocator):\n");
    for (int k = 0; k < kMemCategoryCount; ++k)
        if (peak.peak[k])
            std::printf("  %-16s %12s\n", std::string(kMemCategoryNames[k]).c_str(),
                        format_bytes(peak.peak[k]).c_str());
    std::printf("  %-16s %12s\n", "total (peak)", format_bytes(peak.total_peak).c_str());
}

// Writes --save (atomically: a temporary file renamed over it) and records the step as a counter, so that the GUI
// can offer to resume from it.
void save_checkpoint_now(Trainer& trainer, const TrainConfig& cfg, const RunProfiler& profiler) {
    trainer.save(cfg.save);
    if (profiler.active()) prof::record_counter(US_PROF_NAME("checkpoint_step"), double(trainer.steps_done()));
    if (!cfg.quiet) std::fprintf(stderr, "saved checkpoint %s (step %d)\n", cfg.save.c_str(), trainer.steps_done());
}

// A --save that cannot be written is refused before the first step, not found after the last one. Rank 0 writes
// checkpoints; every rank learns whether it can, so that all of them stop with the message.
void check_checkpoint_path(const TrainConfig& cfg, ProcessGrid& grid) {
    if (cfg.save.empty()) return;
    const std::string why = grid.world_rank() == 0 ? why_not_writable_file(cfg.save) : "";
    if (grid.world().all_reduce_max(why.empty() ? 0.0 : 1.0) == 0) return;
    if (!why.empty()) fail_user("cannot write --save '{}': {}; check the path (nothing was trained)", cfg.save, why);
    fail_user("rank 0 cannot write --save '{}' (its message says why)", cfg.save);
}

// The files the run reads (--load, --data) are opened by the trainer after the trace is; one that cannot be read is
// refused first (readable_file.h).
void check_input_files(const TrainConfig& cfg) {
    if (const std::string why = unreadable_input(cfg); !why.empty())
        fail_user("{}; check the path (nothing was trained, no trace written)", why);
}

// Testing only: ULTRASCOPE_FAKE_CLOCK_OFFSET_NS=RANK:NS shifts that rank's clock by NS, as another host's would be.
void apply_fake_clock_offset(int world_rank) {
    const char* env = std::getenv("ULTRASCOPE_FAKE_CLOCK_OFFSET_NS");
    if (!env) return;
    const std::string text = env;
    const size_t colon = text.find(':');
    char* end = nullptr;
    const long rank = colon == std::string::npos ? -1 : std::strtol(text.c_str(), &end, 10);
    const bool rank_ok = colon != std::string::npos && end == text.c_str() + colon && rank >= 0;
    const long long ns = rank_ok ? std::strtoll(text.c_str() + colon + 1, &end, 10) : 0;
    US_CHECK_INPUT(rank_ok && colon + 1 < text.size() && *end == '\0',
                   "ULTRASCOPE_FAKE_CLOCK_OFFSET_NS='{}': expected RANK:NANOSECONDS, e.g. 1:5000000000 (a testing aid: "
                   "it shifts that rank's clock as another host's would be); unset it for real runs",
                   text);
    if (rank == world_rank) prof::set_clock_shift_for_testing(int64_t(ns));
}

RankInfo rank_info(ProcessGrid& grid) {
    RankInfo r;
    r.rank = grid.world_rank();
    r.world = grid.world_size();
    const GridCoords& c = grid.coords();
    const ParallelLayout& p = grid.degrees();
    r.coords = {.dp = c.dp, .pp = c.pp, .tp = c.tp, .cp = c.cp, .ep = c.ep};
    r.grid = {.dp = p.dp, .pp = p.pp, .tp = p.tp, .cp = p.cp, .ep = p.ep};
    r.comm_backend = MpiRuntime::initialized() ? "mpi" : "none";
    if (MpiRuntime::initialized()) MpiRuntime::estimate_clock_offset(r.clock_offset_ns, r.clock_uncertainty_ns);
    return r;
}

// Testing only: --fault-kill-step kills this rank just before the step it names, as a crashed rank would end.
void kill_at_fault_step(const TrainConfig& cfg, ProcessGrid& grid, const Trainer& trainer) {
    if (cfg.fault_step == trainer.steps_done() + 1 && cfg.fault_rank == grid.world_rank()) {
        std::fprintf(stderr, "ultrascope-train: rank %d: killing itself at step %d (--fault-kill-step)\n",
                     grid.world_rank(), cfg.fault_step);
        std::fflush(stderr);
        raise(SIGKILL);
    }
}

// The flight recorder (docs/engine-flight-recorder.md): every group of the grid recorded, before the trainer takes
// them, and the thread that writes dumps on the watchdog's timeout, on SIGUSR1 and when the rank dies.
void start_flight_recorder(const TrainConfig& cfg, ProcessGrid& grid) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const char* comm_limit = std::getenv("ULTRASCOPE_COMM_TIMEOUT_S");  // the progress engine's abort (mpi_progress.h)
    FlightRecorderOptions o;
    o.capacity = cfg.fr_buffer_size;
    o.rank = grid.world_rank();
    o.host = host;
    o.timeout_ms = int64_t(1000 * (cfg.hang_timeout > 0 ? cfg.hang_timeout : comm_limit ? std::atof(comm_limit) : 300));
    o.comm_lib_version = MpiRuntime::initialized() ? MpiRuntime::library_version() : "none (one rank)";
    o.injected_fault = InjectedHang::describe(cfg);
    flight_recorder().configure(o);
    grid.record_in_flight();
    start_flight_dumps(FlightDumpOptions{cfg.hang_timeout, cfg.fr_dump_dir});
}

// What the step loop keeps watching besides the steps: the time since the hosts' clocks were compared, and the
// live stream to the listener.
struct StepWatch {
    static constexpr double kClockEstimateEveryS = 300;
    double since_clock_estimate_s = 0;
    bool stop_with_listener = false, said_lost = false;
};

// Clocks of different hosts drift apart: the offset is estimated again every few minutes of training. The step time
// is the world's maximum, so every rank counts the same time and re-estimates at the same step.
void reestimate_clock_when_due(const StepMetrics& m, const Trainer& trainer, RunProfiler& profiler, StepWatch& w) {
    w.since_clock_estimate_s += m.step_ms / 1e3;
    if (w.since_clock_estimate_s >= StepWatch::kClockEstimateEveryS && MpiRuntime::initialized() && profiler.active()) {
        w.since_clock_estimate_s = 0;
        int64_t offset = 0, uncertainty = 0;
        MpiRuntime::estimate_clock_offset(offset, uncertainty);
        profiler.update_clock(offset, uncertainty, trainer.steps_done());
    }
}

// Whether every rank stops now because the launcher's listener went away (decided together, all-reduced); a run
// that keeps training says once that its stream is gone.
bool listener_gone(const TrainConfig& cfg, ProcessGrid& grid, const RunProfiler& profiler, StepWatch& w) {
    if (profiler.stream_lost() && !w.said_lost) {
        w.said_lost = true;
        if (!w.stop_with_listener)
            std::fprintf(
                stderr, "ultrascope-train: rank %d: the live stream to %s is gone; training goes on%s\n",
                grid.world_rank(), cfg.connect.c_str(),
                cfg.trace.empty() ? "" : fmt::format(" (the trace is still written to {})", cfg.trace).c_str());
    }
    if (!w.stop_with_listener) return false;
    US_FLIGHT_FRAME("run_training (each step's check for a rank's lost live stream)", FrameDetail::none);
    return grid.world().all_reduce_max(profiler.stream_lost() ? 1.0 : 0.0) > 0;
}

// The end of a run stopped with its listener: the checkpoint is left as it was and the trace says why it ended.
int stop_without_listener(const TrainConfig& cfg, ProcessGrid& grid, const Trainer& trainer, RunProfiler& profiler) {
    std::fprintf(stderr, "ultrascope-train: rank %d: the launcher's live stream is gone: stopping after step %d%s\n",
                 grid.world_rank(), trainer.steps_done(),
                 cfg.save.empty() ? "" : " (the last checkpoint stays as it was)");
    profiler.finish(false,
                    fmt::format("the launcher's live stream went away; stopped after step {}", trainer.steps_done()));
    return 143;
}

// Libraries make some of their device state at first use: NCCL connects its peers (and allocates their buffers)
// at a communicator's first collective, cuBLAS and cuDNN their plans. What the untracked device memory grew by
// over the first step is named as such, and the trace's metadata updated.
void note_first_step_footprint(Backend& device, int64_t before, RunProfiler& profiler) {
    if (before < 0) return;
    device_footprint().note_since(device, "made at first use in step 1 (NCCL's connections, library plans)", before);
    profiler.update_device_memory_parts(device_footprint().parts());
}

// The end of a run that did all its steps: the last checkpoint, the trace closed (its parts merged by rank 0 once
// every part is complete) and the summary.
void finish_run(const TrainConfig& cfg, ProcessGrid& grid, Trainer& trainer, RunProfiler& profiler,
                const std::vector<StepMetrics>& history, double seconds) {
    const bool lead = grid.world_rank() == 0;
    if (!cfg.save.empty()) save_checkpoint_now(trainer, cfg, profiler);
    profiler.finish(true);
    if (profiler.needs_merge()) {
        grid.world().barrier();  // every part is complete
        if (lead) prof::merge_trace_parts(profiler.trace_path(), grid.world_size());
    }
    if (!cfg.quiet && profiler.active() && !profiler.trace_path().empty())
        std::fprintf(stderr, "trace written to %s\n", profiler.trace_path().c_str());
    if (!cfg.quiet) print_summary(trainer, history, seconds);
}

}  // namespace

int run_training(TrainConfig& cfg, Backend& device, ProcessGrid& grid) {
    const bool lead = grid.world_rank() == 0;  // rank 0 prints, writes metrics and checkpoints
    if (!lead) cfg.quiet = true;
    if (MpiRuntime::initialized() && cfg.runtime.comm_progress == "poll")
        device.set_progress_hook(&MpiRuntime::progress);
    apply_fake_clock_offset(grid.world_rank());
    check_checkpoint_path(cfg, grid);
    check_input_files(cfg);
    RankInfo rank = rank_info(grid);
    // GPU tensors travel over NCCL (or MPI with host staging where NCCL cannot run): the trace says which.
    if (device.is_async() && cfg.runtime.nccl_shared_gpu) give_ranks_their_own_nccl_hosts(grid.world());
    if (device.is_async()) {
        const int64_t before = DeviceFootprint::untracked_now(device);
        rank.comm_backend = grid.use_device_communicators(device);
        if (rank.comm_backend.find("nccl") != std::string::npos)
            device_footprint().note_since(device, "NCCL communicators", before);
    }
    start_flight_recorder(cfg, grid);
    struct StopFlightDumps {
        ~StopFlightDumps() { stop_flight_dumps(); }  // on every way out: the thread ends before the process does
    } stop_flight_dumps_at_exit;
    RunProfiler profiler(cfg, device, rank);
    std::optional<ProfiledBackend> profiled;
    if (profiler.active()) profiled.emplace(device);
    Backend& be = profiled ? static_cast<Backend&>(*profiled) : device;
    Trainer trainer(cfg, be, &grid);
    // Everything that can be refused has been checked: only now are output files created.
    std::optional<MetricsWriter> metrics;
    if (!cfg.metrics_out.empty() && lead) metrics.emplace(cfg.metrics_out);
    if (!cfg.quiet)
        std::fprintf(stderr, "ultrascope-train: %lld parameters on %s, %d steps from step %d\n",
                     (long long)cfg.model.num_params(), device.device_description().c_str(), cfg.steps,
                     trainer.steps_done());
    Progress progress(cfg.steps, cfg.quiet);
    std::vector<StepMetrics> history;
    // A run launched by the GUI or `ultrascope run` stops when its listener goes away; one started elsewhere and
    // attached keeps training. Every rank stops at the same step: the decision is all-reduced.
    const char* stop_env = std::getenv("ULTRASCOPE_STOP_WITH_LISTENER");
    StepWatch watch;
    watch.stop_with_listener = stop_env && std::string(stop_env) == "1" && profiler.active();
    bool stopped = false;
    const auto t0 = std::chrono::steady_clock::now();
    const int first_step = trainer.steps_done() + 1;
    while (trainer.steps_done() < cfg.steps) {
        kill_at_fault_step(cfg, grid, trainer);
        flight_recorder().begin_step(trainer.steps_done() + 1);
        const bool first = trainer.steps_done() + 1 == first_step;  // one device reading, not one a step
        const int64_t untracked_before = first ? DeviceFootprint::untracked_now(device) : -1;
        StepMetrics m = trainer.train_step();
        if (first) note_first_step_footprint(device, untracked_before, profiler);
        if (!std::isfinite(m.loss))
            fail_user("the loss became {} at step {}: lower --lr or use --precision fp32", m.loss, m.step);
        if (metrics) metrics->write(m);
        progress.update(m);
        history.push_back(m);
        if (cfg.save_every > 0 && m.step % cfg.save_every == 0 && m.step < cfg.steps)
            save_checkpoint_now(trainer, cfg, profiler);
        reestimate_clock_when_due(m, trainer, profiler, watch);
        if (listener_gone(cfg, grid, profiler, watch)) {
            stopped = true;
            break;
        }
    }
    progress.finish();
    flight_recorder().end_steps();  // what follows (the checkpoint, the trace's merge) is not a stuck step
    trainer.end_injected_load();    // nor is it slowed on purpose
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (stopped) return stop_without_listener(cfg, grid, trainer, profiler);
    finish_run(cfg, grid, trainer, profiler, history, seconds);
    return 0;
}

}  // namespace us
