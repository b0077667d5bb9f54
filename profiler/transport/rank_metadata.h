// A rank's metadata: the record that travels ahead of its spans (EventSink::write_metadata) and says what the rank
// was: its place in the grid, host and device, the run's settings, its clock estimate, or (a predicted rank) what
// the planner assumed. Written and read only through this type's (de)serializer, by the engine
// (engine/train/profiling.cpp), the planner (app/plan/predicted_metadata.cpp) and RunInfo
// (profiler/trace/run_info.cpp), so the keys are named once; the JSON is the format traces have always had, so old
// traces read back unchanged.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/transport/grid_coords.h"

namespace us::prof {

// How this rank's clock was put on rank 0's time base.
struct ClockEstimate {
    std::string source;  // the clock read ("CLOCK_MONOTONIC (read through the TSC)")
    int64_t offset_ns = 0;
    int64_t uncertainty_ns = 0;  // half the best round trip; 0 on a shared host
    std::string method;
    int estimated_at_step = 0;
};

// A row HTA counts as GPU time that an imported rank does not hold as a device span (a stream's row that is not a
// kernel, memcpy or memset; profiler/import's KinetoFile::stream_rows), kept for HTA's figures only
// (hta_breakdown.h). JSON: [begin, end, stream, name, launch, correlated].
struct HtaStreamRow {
    int64_t begin = 0, end = 0;  // ns, the file's clock
    int64_t stream = -1;         // args.stream; -1 unknown
    std::string name;
    // The runtime call with the row's correlation id (correlated), or the row's own begin without a correlation (a
    // CPU row to HTA's filter); unknown when the correlation has no call in the file.
    std::optional<int64_t> launch;
    bool correlated = false;
};

// What holds a GPU's memory outside the tracked allocator, named where the engine can tell (the CUDA context and
// cuBLAS at the backend's start, NCCL's communicators, CUPTI): the device's memory in use less the allocator's
// reserved bytes, read before and after each started (engine/backend/device_footprint.h). JSON: [name, bytes].
struct DeviceMemoryPart {
    std::string name;
    int64_t bytes = 0;
};

struct RankMetadata {
    static constexpr const char* kFormat = "ultrascope-rank-metadata";
    int rank = 0;
    int world_size = 1;  // read back as 0 where the record does not say (an importer that could not tell)
    GridCoords coords;   // key "coords"; unknown on an imported rank
    GridSizes grid;      // key "grid": the degrees; unknown on an imported rank
    // Micro-batches per step where the source says (key "microbatches", an imported pipelined run's); the engine's
    // are in its settings.
    std::optional<int> microbatches;
    std::string host;
    std::optional<int> pid;      // a recorded rank's process; none for a predicted one
    std::string device;          // "NVIDIA H100 80GB HBM3", "cpu (...)", a planner's GPU name
    std::string backend;         // "cpu", "cuda", "predicted"
    std::optional<int> threads;  // CPU threads of a recorded rank
    // Where a recorded rank's threads may run (engine/train/cpu_placement.h): its machine (the kernel's boot id,
    // the same on every rank of one machine whatever its host name) and the CPUs its process may use ("0-3,8").
    std::optional<std::string> machine, cpus;
    // The run's settings as common/settings writes them (TrainConfig::to_json: the settings table's keys); none
    // where the source does not know them (a planned layout of another model).
    std::optional<nlohmann::json> settings;
    double device_peak_gflops = 0;
    std::string device_peak_source;
    std::optional<std::string> blas_kernel;   // a recorded rank: the OpenBLAS core
    std::optional<std::string> comm_backend;  // a recorded rank: "mpi", "nccl", "none"
    // A recorded GPU rank: the kernels of its whole-sequence attention (--attention flash or cudnn), e.g. "cuDNN
    // 9.10.2 fused attention (graph API), deterministic backward" (key "attention_kernels").
    std::optional<std::string> attention_kernels;
    // An injected straggler (--slow-rank, --slow-factor): how many times as long this rank computed. Shown wherever
    // the rank is, so that an injected slowdown is never read as a real one.
    std::optional<double> injected_slow_factor;
    std::optional<std::string> injected_slow_kind;  // "work" (repeated compute) or "load" (busy threads on its CPU)
    // An injected hang (--hang-rank, --hang-at-step, --hang-kind): the run's fault in words, on every rank, so that
    // a hang made on purpose is never read as a real one.
    std::optional<std::string> injected_hang;
    int64_t tokens_per_step = 0;
    int64_t params = 0;
    std::optional<ClockEstimate> clock;
    std::optional<int64_t> started_unix_ms;
    std::optional<nlohmann::json> cupti;                // a CUDA rank: its CUPTI collector's status and counts
    std::vector<DeviceMemoryPart> device_memory_parts;  // a CUDA rank: the untracked device memory, named
    std::optional<nlohmann::json> predicted;  // a predicted rank: the planner's model, cluster, layout and step
    // A rank read from another framework's files (profiler/import): where it came from, its file, and the real
    // stream and thread ids its device and host sub-lanes stand for, by slot; and the run-level description
    // (process groups, devices, clock method), which is RunInfo's, under "run".
    std::string source;  // "kineto"; empty for the engine's and the planner's ranks
    std::optional<std::string> file;
    std::optional<std::string> rank_from;                 // how the rank was known: "distributedInfo", "file name"
    nlohmann::json versions = nlohmann::json::object();   // the source's schema and framework versions
    nlohmann::json stream_ids = nlohmann::json::array();  // key "streams"
    nlohmann::json thread_ids = nlohmann::json::array();  // key "threads" (an array here; a count on engine ranks)
    // The run's description as the importer saw it from this rank's file, written by RunInfo's serializer
    // (profiler/trace/run_info.h, imported_run_info) and kept whole: key "run".
    std::optional<nlohmann::json> run;
    std::vector<HtaStreamRow> hta_stream_rows;  // key "hta_stream_rows"; an imported GPU rank's

    bool imported() const { return source == "kineto"; }
};

nlohmann::json to_json(const RankMetadata& m);
// Reads what the JSON holds; a field it lacks stays unknown (nullopt) or at its zero. Unknown keys are ignored (a
// newer writer's).
RankMetadata rank_metadata_from_json(const nlohmann::json& j);

}  // namespace us::prof
