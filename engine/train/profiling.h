// Turns the profiler on for a run of ultrascope-train: sinks for --trace FILE and --connect HOST:PORT, the rank's
// metadata (rank, grid coordinates, host, device, threads, config, measured device peak, clock offset), the
// allocator's alloc/free events, and on the CUDA backend the CUPTI collector (kernels on the device lanes; its
// status and statistics in the metadata's "cupti"). The trainer then wraps its backend in a ProfiledBackend.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/backend/backend.h"
#include "common/settings/config.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {
class TcpSink;
}

namespace us {

// Where this process sits in the run. Filled from the process grid (or env for a single rank).
struct RankInfo {
    int rank = 0;
    int world = 1;
    prof::GridCoords coords{.dp = 0, .pp = 0, .tp = 0, .cp = 0, .ep = 0};
    prof::GridSizes grid{.dp = 1, .pp = 1, .tp = 1, .cp = 1, .ep = 1};
    int64_t clock_offset_ns = 0;       // this rank's CLOCK_MONOTONIC minus rank 0's
    int64_t clock_uncertainty_ns = 0;  // half the best round trip of the estimate; 0 on a shared host
    std::string comm_backend = "none";
};

class RunProfiler {
public:
    // Starts recording when cfg.trace or cfg.connect is set; otherwise does nothing. A rank that cannot reach the
    // listener says so on stderr and keeps training (and still writes --trace).
    RunProfiler(const TrainConfig& cfg, Backend& backend, const RankInfo& rank);
    ~RunProfiler();
    RunProfiler(const RunProfiler&) = delete;
    RunProfiler& operator=(const RunProfiler&) = delete;

    bool active() const { return m_active; }
    // Flushes and ends the streams (the GPU's records first); `clean` tells consumers whether the run ended
    // normally.
    void finish(bool clean, const std::string& reason = {});
    // Multi-rank --trace: after every rank finished, rank 0 merges the per-rank parts into FILE.
    bool needs_merge() const { return m_active && !m_trace_path.empty() && m_world > 1; }
    const std::string& trace_path() const { return m_trace_path; }
    // The live stream connected and then broke (the listener went away or stopped reading).
    bool stream_lost() const;
    // A new estimate of this rank's clock offset (multi-host runs, every few minutes): the metadata carries it to
    // consumers, which apply it to the events that follow.
    void update_clock(int64_t offset_ns, int64_t uncertainty_ns, int step);
    // The untracked device memory, named (device_footprint.h), in the trace's metadata from now on.
    void update_device_memory_parts(const std::vector<prof::DeviceMemoryPart>& parts);

private:
    class AllocatorListener;
    bool m_active = false;
    bool m_finished = false;
    bool m_cupti = false;  // the CUPTI collector is running
    int m_world = 1;
    std::string m_trace_path;
    prof::RankMetadata m_metadata;  // sent again at the end, with the collector's statistics
    Backend& m_backend;
    std::unique_ptr<AllocatorListener> m_listener;
    const prof::TcpSink* m_stream = nullptr;  // owned by the recorder until finish()
};

prof::RankMetadata rank_metadata(const TrainConfig& cfg, const Backend& backend, const RankInfo& rank,
                                 const DevicePeak& peak);

}  // namespace us
