// The step-time model (docs/planner.md): compute per op from its FLOPs (GEMMs at an efficiency that depends on
// their size, calibrated per machine) or its elements (memory-bound ops), collectives by the alpha-beta model on the
// link level their group spans, overlap rules for data parallelism, ZeRO and the cp ring, and the pipeline's bubble
// from simulating the schedule the engine runs with these per-micro-batch costs. Every piece is a figure of its own.
#pragma once

#include <string>
#include <vector>

#include "app/plan/cluster_desc.h"
#include "app/plan/layout.h"
#include "app/plan/model_desc.h"

namespace us::plan {

// Seconds per step, by piece. compute_* and *_exposed add up to step_s (with bubble_s); *_hidden is time spent
// behind compute, shown but not added.
struct StepPieces {
    double gemm_s = 0;           // the GEMMs of forward and backward (recomputation aside), over the step
    double attention_s = 0;      // the attention core
    double other_ops_s = 0;      // norms, element-wise ops, embedding, loss, host overhead
    double recompute_s = 0;      // the forward work recomputation repeats
    double tp_comm_s = 0;        // tensor/sequence-parallel collectives (on the critical path)
    double cp_comm_exposed_s = 0, cp_comm_hidden_s = 0;  // the ring's transfers beyond / behind attention
    double ep_comm_s = 0;        // expert-parallel all-to-alls
    double pp_comm_s = 0;        // pipeline transfers on the critical path
    double bubble_s = 0;         // the pipeline's idle time (simulated schedule)
    double dp_comm_exposed_s = 0, dp_comm_hidden_s = 0;  // gradient reduction and ZeRO gathers
    double optimizer_s = 0;
    double step_s = 0;
    double forward_s = 0, backward_s = 0;  // one micro-batch on the busiest stage (what the schedule simulates)
};

struct CollectiveCost;

StepPieces estimate_step(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout);

// The link a group uses: inside a node when its ranks (stride apart in the rank order) fit in one.
const Link& group_link(const ClusterDesc& c, int stride, int size);
// Alpha-beta times (docs/planner.md) of one collective of `bytes` (the whole buffer) over n ranks on a link.
double all_reduce_s(double bytes, int n, const Link& link);
double all_gather_s(double bytes, int n, const Link& link);  // also reduce-scatter
double all_to_all_s(double sent_bytes, int n, const Link& link);
double send_s(double bytes, const Link& link);

}  // namespace us::plan
