// The step-time model (docs/planner.md): compute per op from its FLOPs (GEMMs at an efficiency that depends on
// their size, calibrated per machine) or its elements (memory-bound ops), collectives by the alpha-beta model on the
// link level their group spans, overlap rules for data parallelism, ZeRO and the cp ring, and the pipeline's bubble
// from simulating the schedule the engine runs with these per-micro-batch costs. Every piece is a figure of its own.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/layout.h"
#include "profiler/predict/model_desc.h"
#include "profiler/predict/model_shapes.h"
#include "profiler/predict/pipeline_sim.h"

namespace us::predict {

class SharedWork;

// Seconds per step, by piece. compute_*, *_exposed, bubble_s and overlap_slowdown_s add up to step_s; *_hidden is
// time spent behind compute, shown but not added.
struct StepPieces {
    double gemm_s = 0;       // the GEMMs of forward and backward (recomputation aside), over the step
    double attention_s = 0;  // the attention core
    double other_ops_s = 0;  // norms, element-wise ops, embedding, loss, host overhead
    double recompute_s = 0;  // the forward work recomputation repeats
    double tp_comm_s = 0;    // tensor/sequence-parallel collectives (on the critical path)
    double cp_comm_exposed_s = 0, cp_comm_hidden_s = 0;  // the ring's transfers beyond / behind attention
    double ep_comm_s = 0;                                // expert-parallel all-to-alls
    double pp_comm_s = 0;                                // pipeline transfers on the critical path
    double bubble_s = 0;                                 // the pipeline's idle time (simulated schedule)
    double dp_comm_exposed_s = 0, dp_comm_hidden_s = 0;  // gradient reduction and ZeRO gathers
    double optimizer_s = 0;
    // Compute slowed by the communication hidden beside it (the cluster's overlap_slowdown x the hidden time): the cp
    // ring's share lengthens the attention (and the pipeline's slots), the data-parallel share is charged at the
    // stage's end. Added to the step.
    double overlap_slowdown_s = 0;
    double step_s = 0;
    double forward_s = 0, backward_s = 0;  // one micro-batch on the busiest stage (what the schedule simulates)
    // The resources the model charges, busy over the step on the stage shown: the compute stream (every op,
    // recomputation, their slowdown beside hidden transfers, the optimizer) and each link level (kLinkIntra,
    // kLinkInter: every group's transfers on it, exposed or hidden). The step is never shorter than any of them
    // (tests/unit/test_planner_physics.cpp).
    double compute_busy_s = 0;
    std::array<double, 2> link_busy_s{};
};
inline constexpr int kLinkIntra = 0, kLinkInter = 1;

// One micro-batch's forward and backward on a stage (or one chunk of it), by piece.
struct StageCost {
    double gemm_f = 0, attn_f = 0, other_f = 0;
    double gemm_b = 0, attn_b = 0, other_b = 0;
    double gemm_w = 0;  // of gemm_b, the weight gradients (a split schedule's W action)
    double recompute = 0;
    double tp_f = 0, tp_b = 0, cp_exposed_f = 0, cp_exposed_b = 0, cp_hidden = 0, ep_f = 0, ep_b = 0;
    double tp_vocab = 0;    // of tp_f, the vocabulary-parallel ends' all-reduce (first and last stage)
    double cp_scatter = 0;  // of cp_exposed_b, --cp-comm allgather's reduce-scatter after the attention
    // The attention's slowdown while the ring's transfers run beside it (overlap_slowdown x the hidden time).
    double contention_f = 0, contention_b = 0;
    double pp = 0;  // transfers into the stage per micro-batch (forward activations and backward gradients)
    std::array<double, 2> link{};  // per link level: every transfer of this micro-batch on it, exposed or hidden
    double compute() const {
        return gemm_f + attn_f + other_f + gemm_b + attn_b + other_b + recompute + contention_f + contention_b;
    }
    double forward() const { return gemm_f + attn_f + other_f + contention_f + tp_f + cp_exposed_f + ep_f; }
    double backward() const {
        return gemm_b + attn_b + other_b + recompute + contention_b + tp_b + cp_exposed_b + ep_b;
    }
    StageCost& operator+=(const StageCost& o) {
        gemm_f += o.gemm_f, attn_f += o.attn_f, other_f += o.other_f, gemm_b += o.gemm_b, attn_b += o.attn_b;
        other_b += o.other_b, gemm_w += o.gemm_w, recompute += o.recompute, tp_f += o.tp_f, tp_b += o.tp_b;
        cp_exposed_f += o.cp_exposed_f, cp_exposed_b += o.cp_exposed_b, cp_hidden += o.cp_hidden,
            tp_vocab += o.tp_vocab, cp_scatter += o.cp_scatter, contention_f += o.contention_f,
            contention_b += o.contention_b;
        ep_f += o.ep_f, ep_b += o.ep_b, pp += o.pp, link[0] += o.link[0], link[1] += o.link[1];
        return *this;
    }
};

// A link level whose bandwidth the backward's blocking transfers share with another flow (the gradient buckets): on
// it they take `factor` times as long. level -1: none.
struct BackwardLinkShare {
    int level = -1;
    double factor = 1.0;
};

// The cost of the layers and ends (embedding on the first, head on the last) that `r` holds: a whole stage, or one
// chunk of an interleaved stage (chunk_shapes).
StageCost stage_cost(const ModelDesc& m, const ClusterDesc& c, const Layout& l, const RankShapes& r,
                     const BackwardLinkShare& share = {});

// Data parallelism and ZeRO over the dp x cp ranks holding the same parameters (experts: dp/ep x cp), for the
// ranks of one stage, and the optimizer over the rank's shard.
struct DpCost {
    double exposed = 0, hidden = 0, optimizer = 0;
    double contention = 0;        // compute slowed by the hidden part (overlap_slowdown x hidden), at the stage's end
    int link_level = kLinkIntra;  // the level its reduction and gathers use
    // Of exposed + hidden, the bucket traffic that flows during the backwards (overlapped): the gradients'
    // reduction, and ZeRO-3's backward gathers; not the gathers after the optimizer nor the embedding's sync.
    double backward_traffic = 0;
};

DpCost dp_cost(const ModelDesc& m, const ClusterDesc& c, const Layout& l, const RankShapes& r, const StageCost& one);

// The whole step as the model sees it: each stage's and virtual stage's costs, the simulated schedule (every action
// placed in time; without a pipeline the micro-batches' forward and backward in turn), each stage's data-parallel
// costs, and the stage that ends last. estimate_step reads its pieces from it; the predicted timeline draws it.
// With `shared` (a search's, shared_work.h) the schedule and its simulation come from there, the same figures, and
// pipeline.actions is left empty.
struct StepModel {
    int chunks = 1;                // virtual stages per rank
    std::vector<StageCost> stage;  // per stage: one micro-batch over all its chunks
    std::vector<StageCost> chunk;  // per virtual stage (chunk * pp + stage)
    std::vector<DpCost> dp;        // per stage
    PipelineTiming pipeline;
    double transfer_s = 0;  // one activation between pipeline stages
    int critical_stage = 0;
    double step_s = 0;
};
StepModel model_step(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout,
                     SharedWork* shared = nullptr);

StepPieces estimate_step(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout,
                         SharedWork* shared = nullptr);

// The link a group uses: inside a node when its ranks (stride apart in the rank order) are all on one: under block
// placement when they fit in one node's consecutive ranks, under cyclic placement (rank r on node r mod nodes) when
// the stride is a multiple of the node count.
const Link& group_link(const ClusterDesc& c, int stride, int size);
int link_level(const ClusterDesc& c, const Link& link);  // kLinkIntra or kLinkInter
// Alpha-beta times (docs/planner.md) of one collective of `bytes` (the whole buffer) over n ranks on a link.
double all_reduce_s(double bytes, int n, const Link& link);
double all_gather_s(double bytes, int n, const Link& link);  // also reduce-scatter
double all_to_all_s(double sent_bytes, int n, const Link& link);
double send_s(double bytes, const Link& link);

}  // namespace us::predict
