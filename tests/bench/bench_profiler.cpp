// What profiling costs. (1) The recording cost per event: a tight loop of zones (two clock reads and a ring write
// each) while the collector drains into a null sink. (2) Step time with full tracing (every op, layer, phase,
// alloc/free, written to a trace file) against no tracing, on the small preset, alternating the two trainers step
// by step in one run so that machine noise hits both alike. (3) Trace bytes per event.
//   build/bin/bench_profiler [steps]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/peak.h"
#include "engine/backend/profiled_backend.h"
#include "engine/train/profiling.h"
#include "engine/train/trainer.h"
#include "profiler/record/zones.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/trace_file.h"
#include <thread>

using namespace us;

namespace {

class NullSink final : public prof::EventSink {
public:
    uint64_t events = 0;
    void write_metadata(const std::string&) override {}
    void write_batch(const prof::EventBatch& b) override { events += b.events.size(); }
    void finish(bool, uint64_t, const std::string&) override {}
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 40;
    std::printf("profiler overhead benchmark (measured); clock: %s; OpenBLAS %s; OPENBLAS_CORETYPE=%s\n",
                prof::tsc_usable() ? "TSC calibrated to CLOCK_MONOTONIC" : "CLOCK_MONOTONIC",
                cpu::openblas_core_name().c_str(),
                std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");

    // (1) cost per recorded event
    {
        std::vector<std::unique_ptr<prof::EventSink>> sinks;
        sinks.push_back(std::make_unique<NullSink>());
        prof::start_recording(std::move(sinks), "{}", {.flush_ms = 5});
        // Bursts smaller than a thread's ring, with pauses for the collector: every timed event is really written.
        const uint32_t name = prof::string_id("bench zone");
        const int burst = 16384, bursts = 200;
        double best = 1e30, total_ns = 0;
        for (int b = 0; b < bursts; ++b) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < burst; ++i) {
                prof::Zone z(prof::Lane::compute, prof::SpanKind::op, prof::OpClass::gemm, name);
            }
            const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
            best = std::min(best, ns / burst);
            total_ns += ns;
            std::this_thread::sleep_for(std::chrono::milliseconds(8));
        }
        const uint64_t dropped = prof::dropped_events();
        prof::stop_recording(true);
        std::printf(
            "recording cost: %.1f ns per span (mean over %d bursts of %d; best burst %.1f ns; target <= 50 ns); "
            "events dropped: %llu\n",
            total_ns / (double(burst) * bursts), bursts, burst, best, (unsigned long long)dropped);
    }

    // (2) step time, traced against untraced
    TrainConfig cfg;
    apply_preset(cfg, "small");
    cfg.steps = steps;
    cfg.quiet = true;
    cfg.threads = omp_get_max_threads();
    const std::string trace = (std::filesystem::temp_directory_path() / "bench_profiler.ustrace").string();
    cfg.trace = trace;
    CpuBackend plain_backend(cfg.threads), traced_backend(cfg.threads);
    TrainConfig untraced_cfg = cfg;
    untraced_cfg.trace.clear();
    Trainer plain(untraced_cfg, plain_backend);
    RunProfiler profiler(cfg, traced_backend, RankInfo{});
    ProfiledBackend profiled(traced_backend);
    Trainer traced(cfg, profiled);
    std::vector<double> t_plain, t_traced;
    for (int i = 0; i < steps; ++i) {
        // alternate which goes first, so neither always follows the other
        if (i % 2 == 0) {
            t_plain.push_back(plain.train_step().step_ms);
            t_traced.push_back(traced.train_step().step_ms);
        } else {
            t_traced.push_back(traced.train_step().step_ms);
            t_plain.push_back(plain.train_step().step_ms);
        }
    }
    profiler.finish(true);
    t_plain.erase(t_plain.begin());  // step 1 allocates and warms up
    t_traced.erase(t_traced.begin());
    const double mp = median(t_plain), mt = median(t_traced);
    std::printf(
        "small preset, %d threads, %d steps each (medians of steps 2..%d): untraced %.2f ms/step, traced "
        "%.2f ms/step, ratio %.3f (target <= 1.02)\n",
        cfg.threads, steps, steps, mp, mt, mt / mp);

    // (3) trace size
    prof::TraceStore store;
    prof::load_trace(trace, store);
    uint64_t events = store.span_count();
    for (int r : store.ranks()) {
        events += store.rank(r)->memory.size();
        for (auto& [k, v] : store.rank(r)->counters) events += v.size();
    }
    const auto bytes = std::filesystem::file_size(trace);
    std::printf("trace: %llu events in %llu bytes: %.1f bytes per event (zstd-compressed 64-byte records)\n",
                (unsigned long long)events, (unsigned long long)bytes, double(bytes) / double(events));
    std::filesystem::remove(trace);
    return 0;
}
