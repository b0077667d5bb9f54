// The pipeline of a run whose settings the trace does not carry (an imported PyTorch run): its stages found from
// the point-to-point pattern (sends and receives between ranks), ordered by who sends activations to whom in the
// forward, and each stage's bubble per step (its device's idle time, or on a CPU-only rank its compute's, between
// its first and last work of the step), next to the textbook's (p - 1) / m when the micro-batch count m is known.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::prof {

struct StageStep {
    int step = 0;                // our step (Kineto's ProfilerStep#N is step - offset)
    double window_s = 0;         // from the stage's first to its last work of the step
    double work_s = 0;           // its work's union inside the window
    double bubble_s = 0;         // window - work
    double bubble_fraction = 0;  // bubble / work (what (p - 1) / m predicts)
};

struct PipelineStage {
    int rank = 0;
    int stage = 0;        // 0: the first (it sends the first activations)
    bool device = false;  // its work is the GPU's (device lanes), else its compute lane's ops
    std::vector<StageStep> steps;
};

struct PipelineStages {
    std::vector<std::vector<int>> pipelines;  // ranks in stage order, one list per pipeline (data-parallel replica)
    std::vector<PipelineStage> stages;        // every rank of every pipeline
    std::optional<int> microbatches;          // m, when known
    std::string microbatches_from;            // "--microbatches", the annotations ..., or "" (unknown)
    std::optional<double> formula;            // (p - 1) / m, only with m
    std::string order_from;                   // how the forward direction was told
    bool empty() const { return pipelines.empty(); }
};

// Point-to-point transfers in one direction between two ranks (src -> dst), seen from either side (a send to dst,
// a receive from src): the earliest one's begin, and how many were made in forward and in backward phases.
struct TransferEdge {
    int64_t first = INT64_MAX;
    int forward = 0, backward = 0;
};
using TransferEdges = std::map<std::pair<int, int>, TransferEdge>;  // (src, dst) -> their transfers

// The pipelines the transfers form, ranks in stage order: each neighbouring pair's forward direction is the one its
// forward-phase transfers take when phases tell, else its first transfer's (a step starts with the first stage's
// activations); chains start at a stage nothing feeds, and a cycle (virtual stages wrapping round) starts at its
// lowest rank. `order_from` says how the directions were told. Shared by the imported run's section (from spans)
// and by blame (from digests).
std::vector<std::vector<int>> pipeline_chains(const TransferEdges& edges, std::string& order_from);

// microbatches: from `ultrascope report --microbatches M` (0: not given); else the ranks' metadata
// ("microbatches"); else the distinct forward micro-batches one rank annotated in a step (torch.distributed.
// pipelining's "Forward i", "PP:<stage>F<i>"; Schedule1F1B writes none); else unknown.
PipelineStages pipeline_stages(const TraceStore& store, int microbatches = 0);

nlohmann::json pipeline_stages_json(const PipelineStages& p);
std::string format_pipeline_stages(const PipelineStages& p);

}  // namespace us::prof
