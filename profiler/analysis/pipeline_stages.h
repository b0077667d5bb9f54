// The run's pipelines, from the ranks' digests only (cross_rank.h): each its ranks in stage order, from the engine's
// grid where it has pp > 1, else from the point-to-point pattern (sends and receives between ranks, ordered by who
// sends activations to whom in the forward: an imported PyTorch run's), and each stage's bubble per step (its work's
// idle time between its first and last work of the step: the device's on a GPU rank, its compute's on a CPU-only one),
// next to the textbook's (p - 1) / m when the micro-batch count m is known. Blame splits each stage's idle time further
// (pipeline_blame.h); the imported run's section of the report shows this one.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/rank_digest.h"

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

// The pipelines of a run, each its ranks in stage order: by the pp coordinates of the engine's grid where it has
// pp > 1; else each neighbouring pair's forward direction is the one its forward-phase transfers take when phases
// tell, else its first transfer's (a step starts with the first stage's activations); chains start at a stage nothing
// feeds, and a cycle (virtual stages wrapping round) starts at its lowest rank. `order_from` says how the order was
// told.
std::vector<std::vector<int>> pipelines_of(const std::vector<RankDigest>& digests, std::string& order_from);

// microbatches: from `ultrascope report --microbatches M` (0: not given); else the ranks' metadata
// ("microbatches"); else the distinct forward micro-batches one rank annotated in a step (torch.distributed.
// pipelining's "Forward i", "PP:<stage>F<i>"; Schedule1F1B writes none); else unknown.
PipelineStages pipeline_stages(const std::vector<RankDigest>& digests, int microbatches = 0);
// The same from a store: its ranks' digests (without their steps, which it does not read), then the above.
PipelineStages pipeline_stages(const TraceStore& store, int microbatches = 0);

nlohmann::json pipeline_stages_json(const PipelineStages& p);
std::string format_pipeline_stages(const PipelineStages& p);

}  // namespace us::prof
