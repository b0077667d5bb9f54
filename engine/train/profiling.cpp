#include "engine/train/profiling.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/device_footprint.h"
#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/peak.h"
#include "engine/parallel/injected_hang.h"
#include "engine/train/cpu_placement.h"

#include <fmt/format.h>
#include "profiler/record/recorder.h"
#include "profiler/transport/tcp_sink.h"
#include "profiler/transport/trace_file.h"

#if US_HAVE_CUPTI
#include "profiler/record/cupti_collector.h"
#endif

namespace us {

namespace {

#if US_HAVE_CUPTI
nlohmann::json cupti_json(const prof::CuptiSummary& c) {
    nlohmann::json streams = nlohmann::json::array();
    for (const auto& [context, stream] : c.streams) streams.push_back({context, stream});
    const prof::DeviceActivityStats& s = c.stats;
    return {{"running", c.status.running},
            {"status", c.status.message},
            {"kernels", s.kernels},
            {"nccl_kernels", s.nccl_kernels},
            {"memcpys", s.memcpys},
            {"memsets", s.memsets},
            {"syncs", s.syncs},
            {"attributed", s.attributed},
            {"unattributed", s.unattributed},
            {"untimed", s.untimed},
            {"allocations", s.allocations},
            {"releases", s.releases},
            {"unknown_releases", s.unknown_releases},
            {"dropped_records", s.dropped},
            {"overhead_ms", s.overhead_ms},
            {"clock_offset_ns", c.clock_offset_ns},
            {"streams", streams}};
}
#endif

}  // namespace

// Allocator events -> memory records. Labels are interned pointers: their string ids are cached per pointer.
class RunProfiler::AllocatorListener final : public MemoryListener {
public:
    void on_memory_event(const MemoryEvent& e) override {
        if (!prof::enabled()) return;
        uint32_t label;
        {
            std::lock_guard lock(m_mutex);
            auto it = m_ids.find(e.label);
            if (it == m_ids.end()) it = m_ids.emplace(e.label, prof::string_id(e.label ? e.label : "?")).first;
            label = it->second;
        }
        prof::record_memory(e.is_alloc ? int64_t(e.bytes) : -int64_t(e.bytes), uint8_t(e.category),
                            e.category_bytes_after, e.total_bytes_after, label);
    }

private:
    std::mutex m_mutex;
    std::unordered_map<const char*, uint32_t> m_ids;
};

prof::RankMetadata rank_metadata(const TrainConfig& cfg, const Backend& backend, const RankInfo& rank,
                                 const DevicePeak& peak) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    int threads = cfg.threads;
    if (auto* cpu = dynamic_cast<const CpuBackend*>(&backend)) threads = cpu->threads();
    prof::RankMetadata m;
    m.rank = rank.rank, m.world_size = rank.world, m.coords = rank.coords, m.grid = rank.grid;
    m.host = host, m.pid = int(getpid());
    m.device = backend.device_description(), m.backend = std::string(backend.name());
    m.threads = threads;
    if (std::string id = kernel_boot_id(); !id.empty()) m.machine = id;
    if (std::string cpus = affinity_cpu_list(); !cpus.empty()) m.cpus = cpus;
    m.settings = cfg.to_json();
    m.device_peak_gflops = peak.gflops, m.device_peak_source = peak.source;
    m.blas_kernel = cpu::openblas_core_name();
    m.comm_backend = rank.comm_backend;
    if (std::string k = backend.attention_kernels(); !k.empty() && attention_blockwise(cfg.attention))
        m.attention_kernels = k;
    if (cfg.slow_rank == rank.rank && cfg.slow_factor > 1.0)
        m.injected_slow_factor = cfg.slow_factor, m.injected_slow_kind = cfg.slow_kind;
    if (cfg.hang_rank >= 0) m.injected_hang = InjectedHang::describe(cfg);
    m.tokens_per_step = cfg.tokens_per_step();
    m.params = cfg.model.num_params();
    m.clock = prof::ClockEstimate{
        .source = prof::tsc_usable() ? "CLOCK_MONOTONIC (read through the TSC)" : "CLOCK_MONOTONIC",
        .offset_ns = rank.clock_offset_ns,
        .uncertainty_ns = rank.clock_uncertainty_ns,
        .method = "MPI ping-pong against rank 0: the shortest of 16 round trips; uncertainty = half of it",
        .estimated_at_step = 0};
    m.started_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
    return m;
}

RunProfiler::RunProfiler(const TrainConfig& cfg, Backend& backend, const RankInfo& rank)
    : m_world(rank.world), m_backend(backend) {
    if (cfg.trace.empty() && cfg.connect.empty()) return;
    std::vector<std::unique_ptr<prof::EventSink>> sinks;
    if (!cfg.trace.empty()) {
        m_trace_path = cfg.trace;
        const std::string path = rank.world > 1 ? prof::trace_part_path(cfg.trace, rank.rank) : cfg.trace;
        sinks.push_back(
            std::make_unique<prof::FileSink>(std::make_shared<prof::TraceFileWriter>(path), uint32_t(rank.rank)));
    }
    if (!cfg.connect.empty()) {
        const char* token = std::getenv("ULTRASCOPE_TOKEN");
        auto sink = std::make_unique<prof::TcpSink>(prof::parse_endpoint(cfg.connect), uint32_t(rank.rank),
                                                    uint32_t(rank.world), token ? token : "");
        if (!sink->connected())
            std::fprintf(stderr, "ultrascope-train: rank %d: not streaming to %s (%s); training goes on%s\n", rank.rank,
                         cfg.connect.c_str(), sink->error().c_str(), token ? "" : " (ULTRASCOPE_TOKEN is not set)");
        else {
            m_stream = sink.get();
            sinks.push_back(std::move(sink));
        }
    }
    if (sinks.empty()) return;
    DevicePeak peak;
    if (backend.name() == "cpu") {
        int threads = cfg.threads;
        if (auto* cpu = dynamic_cast<CpuBackend*>(&backend)) threads = cpu->threads();
        const cpu::PeakMeasurement measured = cpu::measure_sgemm_peak(threads, 0.3);
        peak.gflops = measured.gflops;
        peak.source = fmt::format("measured: best sgemm of OpenBLAS ({}) on {} thread(s) of this machine ({}, n {})",
                                  measured.blas_kernel, threads, cpu::sgemm_form_name(measured.form), measured.size);
        // A bf16 run's GEMMs take the bf16 path: where its AVX-512 BF16 kernel runs and outruns sgemm, that is the
        // ceiling (an MFU over sgemm's peak could pass 100%). The fallback is sgemm itself: nothing to measure.
        if (cfg.precision == Precision::bf16 &&
            cpu::resolve_bf16_gemm_kernel(cpu::Bf16GemmKernel::automatic) == cpu::Bf16GemmKernel::avx512_bf16) {
            const cpu::PeakMeasurement bf16 = cpu::measure_bf16_gemm_peak(threads, 0.3);
            if (bf16.gflops > peak.gflops) {
                peak.gflops = bf16.gflops;
                peak.source = fmt::format(
                    "measured: best bf16 GEMM ({}) on {} thread(s) of this machine (n {}), "
                    "above OpenBLAS's sgemm ({:.1f} GFLOP/s)",
                    bf16.blas_kernel, threads, bf16.size, measured.gflops);
            }
        }
    } else {
        // A GPU's achievable peak needs long GEMMs to measure; its datasheet dense peak is the usual MFU
        // denominator (an SMs x clock estimate for a device not in the table).
        peak = backend.peak_flops(cfg.precision == Precision::bf16);
    }
    m_metadata = rank_metadata(cfg, backend, rank, peak);
    m_metadata.device_memory_parts = device_footprint().parts();
    prof::start_recording(std::move(sinks), to_json(m_metadata).dump());
    if (backend.name() == "cuda") {
        // Recording first: the collector's records go nowhere before it. The metadata then says whether kernels
        // will be there (consumers keep a rank's latest metadata).
#if US_HAVE_CUPTI
        const int64_t before = DeviceFootprint::untracked_now(backend);
        const prof::CuptiStatus cupti = prof::start_cupti_collector();
        m_cupti = cupti.running;
        if (m_cupti) device_footprint().note_since(backend, "CUPTI", before);
        m_metadata.device_memory_parts = device_footprint().parts();
        m_metadata.cupti = cupti_json(prof::cupti_summary());
        const std::string failure = cupti.running ? std::string() : cupti.message;
#else
        const std::string failure =
            "CUPTI: this build has no CUPTI collector (it needs CUDA 13): kernel-level "
            "spans are off; engine-side spans carry on";
        m_metadata.cupti = nlohmann::json{{"running", false}, {"status", failure}};
#endif
        if (!failure.empty()) std::fprintf(stderr, "ultrascope-train: rank %d: %s\n", rank.rank, failure.c_str());
        prof::update_metadata(to_json(m_metadata).dump());
    }
    m_listener = std::make_unique<AllocatorListener>();
    backend.allocator().set_listener(m_listener.get());
    m_active = true;
}

void RunProfiler::finish(bool clean, const std::string& reason) {
    if (!m_active || m_finished) return;
    m_finished = true;
#if US_HAVE_CUPTI
    if (m_cupti) {
        prof::stop_cupti_collector(clean);  // after an error the GPU may be stuck: no device synchronize then
        m_metadata.cupti = cupti_json(prof::cupti_summary());
        prof::update_metadata(to_json(m_metadata).dump());
    }
#endif
    prof::stop_recording(clean, reason);
    m_backend.allocator().set_listener(nullptr);
}

RunProfiler::~RunProfiler() { finish(false); }

void RunProfiler::update_device_memory_parts(const std::vector<prof::DeviceMemoryPart>& parts) {
    if (!m_active || m_finished) return;
    m_metadata.device_memory_parts = parts;
    prof::update_metadata(to_json(m_metadata).dump());
}

void RunProfiler::update_clock(int64_t offset_ns, int64_t uncertainty_ns, int step) {
    if (!m_active || m_finished) return;
    prof::ClockEstimate& clock = m_metadata.clock.value();  // set when recording started
    clock.offset_ns = offset_ns;
    clock.uncertainty_ns = uncertainty_ns;
    clock.estimated_at_step = step;
    prof::update_metadata(to_json(m_metadata).dump());
}

bool RunProfiler::stream_lost() const { return m_stream && !m_finished && !m_stream->connected(); }

}  // namespace us
