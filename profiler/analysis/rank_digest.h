// A rank reduced to what the run-wide analyses need (docs/blame.md): its place in the grid, per step its figures and
// its work's window, per collective its group instance, index, bytes and times, per pipeline transfer its peer and
// times, its op table's leading rows and HTA's figures. Made once from the rank's spans (one pass over its file, then
// the spans are dropped), a few tens of KB where the rank's JSON is megabytes: what a worker hands to whoever
// gathers, what the cache keeps beside the traces, and all that the run's cross-rank analysis (cross_rank.h: waits
// in collectives, blame, the pipelines) and the Ranks overview read. Thousands of ranks fit in memory as digests
// where their spans would not.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/compute_kind.h"
#include "profiler/analysis/core_wait.h"
#include "profiler/analysis/hta_breakdown.h"
#include "profiler/analysis/op_table.h"
#include "profiler/analysis/stage_work.h"
#include "profiler/analysis/step_breakdown.h"
#include "profiler/event.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// One collective as this rank ran it. `group` indexes RankDigest::groups (the process-group instance); `index` is
// its place among this rank's collectives of that group (the k-th collective of a group instance is the same
// operation on each of its ranks).
struct DigestCollective {
    int32_t group = 0;
    int32_t index = 0;
    OpClass op = OpClass::none;
    int32_t step = 0;
    Phase phase = Phase::none;
    int64_t bytes = 0;
    int64_t begin = 0, end = 0;  // ns, the rank's own clock
};

// One pipeline transfer (a send or a receive to a named peer). `index`: its place among this rank's transfers of
// the same direction with the same peer (the k-th send of a to b pairs with the k-th receive of b from a).
struct DigestTransfer {
    int32_t peer = -1;
    bool send = false;
    int32_t index = 0;
    int32_t step = 0;
    Phase phase = Phase::none;
    int64_t bytes = 0;
    int64_t begin = 0, end = 0;
};

struct DigestStep {
    int32_t step = 0;
    int64_t begin = 0, end = 0;
    double wall_s = 0, compute_s = 0, comm_s = 0, exposed_s = 0, idle_s = 0, bubble_s = 0, p2p_s = 0, overlapped_s = 0;
    std::array<double, kGroupCount> group_exposed_s{};  // by GroupKind: the engine's groups' exposed part (diff)
    double core_wait_s = -1;         // the trainer's thread waiting for a core (core_wait.h); -1 unknown
    double worker_core_wait_s = -1;  // the rank's OpenMP workers' waits for a core, summed (core_wait.h); -1 unknown
    double core_cpu_s = -1, worker_cpu_s = -1;  // their time on a core: the trainer's, the others' summed; -1 unknown
    double bubble_waiting_s = 0;  // of bubble_s, waiting inside the embedding all-reduce (StepBreakdown's)
};

struct DigestGroup {
    std::string key;         // the instance: the same string on every rank of it
    std::string name;        // as the report names it ("dp", "0 (world) default_pg", "unnamed group ...")
    std::vector<int> ranks;  // its members where the trace says (imported process groups), else empty
    int32_t id = 0;          // its spans' group id: a GroupKind for the engine's groups (and an importer's known kinds)
};

struct DigestOp {
    std::string name;
    OpClass op = OpClass::none;
    double calls = 0, self_s = 0;  // per steady step
    ComputeKind kind = ComputeKind::other;
};

struct RankDigest {
    // 2: the grid's sizes, the micro-batches, the work windows and the groups' ids; 3: the host; 4: the steps'
    // exposed time per group, the ops' compute kinds and the compute per kind; 5: the steps' wait for a core; 6: the
    // OpenMP workers' waits and the times on a core; 7: the machine, CPUs and compute threads; 8: the bubble's waiting
    // inside the embedding all-reduce (older cached digests are made again from their traces).
    static constexpr int kVersion = 8;
    int rank = 0;
    std::string label;  // "rank 3 (dp 1, pp 0)"
    std::string host;   // the node it ran on, as its trace says ("" unknown; blame names a slow node)
    // Where its threads could run (RankMetadata::machine, cpus; core_sharing.h): "" unknown; and a CPU rank's
    // compute threads (0: unknown, or a GPU rank).
    std::string machine, cpus;
    int threads = 0;
    GridCoords coords;                // the rank's place in the grid, where known (the engine's); unknown imported
    GridSizes grid;                   // the grid's sizes, where known
    std::optional<int> microbatches;  // per step, where the trace's metadata says (RankMetadata::microbatches)
    int annotated_microbatches = 0;   // the most forward micro-batches it annotated in a step (stage_work.h)
    std::string source;               // "engine", "kineto", "planner"
    int world_size = 0;               // as the rank's trace says (0 unknown)
    bool device = false;              // compute from a GPU's kernels
    std::optional<int64_t> clock_offset_ns;  // the trace's own, where it has one
    std::optional<int64_t> clock_uncertainty_ns;
    std::string file;  // the file it was made from ("" in memory)
    uint64_t file_bytes = 0;
    int64_t file_mtime_ns = 0;
    std::vector<DigestGroup> groups;
    std::vector<DigestStep> steps;
    std::vector<WorkWindow> work_windows;       // per step with work: a pipeline stage's window and busy time
    std::vector<DigestCollective> collectives;  // in begin order
    std::vector<DigestTransfer> transfers;      // in begin order
    std::vector<DigestOp> ops;                  // the op table's leading rows, over the steady steps
    bool ops_complete = false;                  // `ops` holds every row of the op table (none cut)
    // Self time per steady step of every op table row, by compute kind (the runs' diff splits compute by it).
    std::array<double, kComputeKindCount> kind_self_s{};
    std::optional<HtaFigures> hta;

    // As steady_steps: all but step 1 (it warms up), or all of one.
    std::vector<DigestStep> steady() const;
    // Its threads' waits for a core and times on one per steady step (core_wait.h).
    CoreTimes steady_core_times() const;
};

// The digest of rank `rank` of `store` (its steps as analyze_steps gives them, or as given).
RankDigest make_digest(const TraceStore& store, int rank);
RankDigest make_digest(const TraceStore& store, int rank, const std::vector<StepBreakdown>& steps);
// The same with the rank's op table (over its steady steps) and HTA's figures already worked out (the report's).
RankDigest make_digest(const TraceStore& store, int rank, const std::vector<StepBreakdown>& steps, const OpTable& ops,
                       const std::optional<HtaBreakdown>& hta);
// make_digest in two parts, for the report, whose steps need the collectives matched across ranks first (a
// pipeline's window counts the waits in its embedding group's collective): what the rank's spans give without its
// steps (who it is, its groups, collectives, transfers and work windows), then its steps, op table and HTA's figures.
RankDigest digest_without_steps(const TraceStore& store, int rank);
void add_step_figures(RankDigest& d, const std::vector<StepBreakdown>& steps, const OpTable& ops,
                      const std::optional<HtaBreakdown>& hta);

nlohmann::json digest_json(const RankDigest& d);
RankDigest digest_from_json(const nlohmann::json& j);  // throws UserError on a malformed digest
// Compact bytes (CBOR, zstd-compressed) and back; from_bytes throws UserError naming `what` when they do not read.
std::string digest_bytes(const RankDigest& d);
RankDigest digest_from_bytes(const std::string& bytes, const std::string& what);

}  // namespace us::prof
