// What one action (a forward, a backward, or its input or weight half) of one virtual pipeline stage runs, piece by
// piece, in the order it runs, with each piece's predicted seconds, FLOPs and bytes: layer by layer (GEMMs at their
// size's efficiency, the attention core, the memory-bound ops, the tp, cp and ep collectives where they wait or hide)
// or, for very large layouts, one piece per kind of work. predicted_trace.cpp draws them as spans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/plan/planner.h"
#include "profiler/event.h"

namespace us::plan {

// The process groups of a predicted trace's collectives (the span's group field).
constexpr int kGroupDp = 1, kGroupPp = 2, kGroupTp = 3, kGroupCp = 4, kGroupEp = 5;

// One piece of an action, in the order it runs. Comm pieces on the critical path stop compute (tp, ep, exposed
// cp); `hidden_comm` pieces run on the comm lane beside the compute piece they hide behind.
struct Piece {
    std::string name;
    prof::OpClass op = prof::OpClass::none;
    double seconds = 0;
    int group = -1;  // >= 0: a collective of this group on the comm lane (compute waits for it)
    int layer = -1;
    double hidden_comm_s = 0;  // a collective of `hidden_group` running behind this compute piece
    int hidden_group = -1;
    std::string hidden_name;
    uint64_t flops = 0;
    uint64_t bytes = 0;  // what the rank sends for the collective (ring algorithms)
};

// What one action of one virtual stage runs, piece by piece, before scaling to the action's simulated length.
class ActionPieces {
public:
    ActionPieces(const predict::ModelDesc& m, const predict::ClusterDesc& c, const predict::Layout& l,
                 const predict::StageCost& cost, const predict::RankShapes& r, int64_t first_layer, bool detailed)
        : m_m(m),
          m_c(c),
          m_l(l),
          m_cost(cost),
          m_r(r),
          m_first_layer(first_layer),
          m_detailed(detailed),
          m_w(predict::work_inventory(m, l, r)),
          m_peak(c.peak_flops(l.bf16)),
          m_overhead(1.0 + c.host_overhead) {}

    std::vector<Piece> forward() const;

    // `input` / `weight`: the parts a split schedule (zb1) runs as B and W; both for a whole backward.
    std::vector<Piece> backward(bool input, bool weight) const;

private:
    // Context parallelism's exposed transfers: what is left of the ring beyond the attention it hides behind, or the
    // whole of the all-gather's.
    std::string exposed_cp_name() const {
        return m_l.parallel.cp_comm == CpComm::allgather ? "cp all-gather (exposed)" : "cp ring (exposed)";
    }
    prof::OpClass exposed_cp_op() const {
        return m_l.parallel.cp_comm == CpComm::allgather ? prof::OpClass::all_gather : prof::OpClass::send;
    }
    double gemm(const predict::Gemm& g) const;
    double norm_s() const;
    double elementwise_s() const;
    double tp_forward_per_layer() const;
    void add(std::vector<Piece>& p, const std::string& name, prof::OpClass op, double s, int layer,
             const predict::Gemm& g = {}, double flops_factor = 1) const;
    // One all-reduce of the residual stream (T h), or with sp its all-gather and reduce-scatter: 2 (n - 1) / n of it
    // sent.
    void tp(std::vector<Piece>& p, double s, int layer) const;
    void ep(std::vector<Piece>& p, const char* name, int layer) const;
    // One piece per kind, the collectives after the compute they follow.
    std::vector<Piece> coarse(std::vector<Piece> compute, double tp_s, double ep_s, double cp_exposed_s,
                              double cp_hidden_s) const;

    const predict::ModelDesc& m_m;
    const predict::ClusterDesc& m_c;
    const predict::Layout& m_l;
    const predict::StageCost& m_cost;
    const predict::RankShapes& m_r;
    int64_t m_first_layer;
    bool m_detailed;
    predict::WorkInventory m_w;
    double m_peak, m_overhead;
};

}  // namespace us::plan
