// What a run is, whichever way it reached the store: recorded by the engine, predicted by the planner, or imported
// from PyTorch's profiler (Kineto). Ranks, world size, process groups (and how their parallelism was told),
// devices, the clock, where the steps came from, and the run's settings where the source knows them (an imported
// run does not: nullopt, never a default). An importer writes it into each rank's metadata (RankMetadata::run,
// profiler/transport/rank_metadata.h) through to_json below, and it is read back only through run_info_from_json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/transport/grid_coords.h"

namespace us::prof {

class TraceStore;
struct RankTrace;

struct ProcessGroupInfo {
    std::string name;        // the group's name in its source ("0", "3", a hash)
    std::string desc;        // its description ("default_pg", "mesh_tp", "TENSOR_MODEL_PARALLEL_GROUP")
    std::vector<int> ranks;  // global ranks; empty when the source did not list them
    std::string kind;        // "world", "dp", "tp", "pp", "cp", "ep", or "" when nothing told it
    std::string kind_from;   // how: "description", "rank pattern", "send/recv neighbours", or ""
    int group = 0;           // the SpanRecord group id its spans carry (GroupKind number, or kGroupCount + index)
};

struct RunInfo {
    std::string source = "engine";  // "engine", "planner" or "kineto"
    std::vector<int> ranks;         // ranks present in the store
    int world_size = 0;
    std::vector<ProcessGroupInfo> process_groups;      // imported runs; the engine's groups are kGroupKinds
    nlohmann::json devices = nlohmann::json::array();  // as the source describes them (Kineto: deviceProperties)
    std::string clock_method;                          // how the ranks' clocks were put on one time base
    std::optional<int64_t> clock_uncertainty_ns;       // unknown when not measured
    std::string steps_from;                            // "engine", "ProfilerStep", "window"
    int kineto_step_offset = 0;                        // Kineto's ProfilerStep#N is our step N + offset
    std::string backend;                               // "nccl", "gloo", "cpu", "cuda" ...
    std::string comm_backend;                          // the engine's collectives: "mpi", "nccl", "none"; "" unknown
    GridSizes grid;                                    // the engine's and planner's degrees; unknown when imported
    std::optional<nlohmann::json> settings;            // the run's config (engine, planner); nullopt when unknown
    std::vector<std::string> files;                    // the files it was read from (imported runs)

    bool imported() const { return source == "kineto"; }
};

nlohmann::json to_json(const RunInfo& info);
RunInfo run_info_from_json(const nlohmann::json& j);
// The run in a store: the engine's metadata (config, grid, clock) or an importer's (each rank's RankMetadata::run).
RunInfo run_info_of(const TraceStore& store);
// The run as one imported rank's file describes it (its RankMetadata::run); an empty RunInfo for other ranks.
RunInfo imported_run_info(const RankTrace& rt);
// A group id's name: kGroupKinds for the engine's, the process group's kind or description beyond them.
std::string group_name(const RunInfo& info, int group);

// The rank a file name says ("rank-3", "rank3", "rank_3", "rank0_memory_snapshot", any case), or -1: for a
// rank's file (a PyTorch trace or memory snapshot) that does not say its rank inside.
int rank_from_file_name(const std::string& path);

}  // namespace us::prof
