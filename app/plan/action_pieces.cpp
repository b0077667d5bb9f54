// The pieces of one pipeline action (action_pieces.h).
#include "app/plan/action_pieces.h"

#include <algorithm>

namespace us::plan {

using prof::OpClass;

std::vector<Piece> ActionPieces::forward() const {
    if (!m_detailed)
        return coarse({{"GEMMs", OpClass::gemm, m_cost.gemm_f},
                       {"attention", OpClass::attention, m_cost.attn_f + m_cost.contention_f},
                       {"other ops", OpClass::activation, m_cost.other_f}},
                      m_cost.tp_f, m_cost.ep_f, m_cost.cp_exposed_f, m_cost.cp_hidden / 3);
    std::vector<Piece> p;
    if (m_r.first)
        p.push_back({"embedding", OpClass::embedding, m_w.embedding_elements * m_c.embedding_s / 3 * m_overhead});
    const double per_layer_tp = tp_forward_per_layer(), layers = double(std::max<int64_t>(1, m_r.layers));
    for (int64_t i = 0; i < m_r.layers; ++i) {
        const int layer = int(std::min(m_m.layers - 1, m_first_layer + i));
        const bool moe = m_m.is_moe_layer(layer);
        const auto& g = moe ? m_w.moe_layer_gemms : m_w.layer_gemms;
        add(p, "norm 1", OpClass::norm, norm_s(), layer);
        add(p, "qkv", OpClass::gemm, gemm(g[0]), layer, g[0]);
        // The attention's time includes its slowdown beside the ring's hidden transfers (contention_f).
        Piece attn{"attention", OpClass::attention, (m_cost.attn_f + m_cost.contention_f) / layers, -1, layer};
        attn.flops = uint64_t(m_w.attention_flops);
        if (m_l.parallel.cp > 1)
            attn.hidden_comm_s = m_cost.cp_hidden / 3 / layers, attn.hidden_group = kGroupCp,
            attn.hidden_name = "cp ring: key/value blocks";
        // The all-gather's keys and values arrive before the attention; the ring's exposed rest ends with it.
        const bool gathered = m_l.parallel.cp_comm == CpComm::allgather;
        const Piece cp_f{exposed_cp_name(), exposed_cp_op(), m_cost.cp_exposed_f / layers, kGroupCp, layer};
        if (gathered && cp_f.seconds > 0) p.push_back(cp_f);
        p.push_back(attn);
        if (!gathered && cp_f.seconds > 0) p.push_back(cp_f);
        add(p, "attention out", OpClass::gemm, gemm(g[1]), layer, g[1]);
        tp(p, per_layer_tp / 2, layer);
        add(p, "residual", OpClass::activation, elementwise_s() / 2, layer);
        add(p, "norm 2", OpClass::norm, norm_s(), layer);
        if (moe) {
            add(p, "router", OpClass::gemm, gemm(g[2]), layer, g[2]);
            ep(p, "ep all-to-all: dispatch", layer);
            for (size_t k = 3; k < g.size(); ++k)
                add(p, k == 3 ? "experts up" : "experts down", OpClass::gemm, gemm(g[k]), layer, g[k]);
            ep(p, "ep all-to-all: combine", layer);
        } else {
            add(p, "mlp up", OpClass::gemm, gemm(g[2]), layer, g[2]);
            add(p, m_m.swiglu ? "swiglu" : "gelu", OpClass::activation, elementwise_s() / 2, layer);
            add(p, "mlp down", OpClass::gemm, gemm(g[3]), layer, g[3]);
        }
        tp(p, per_layer_tp / 2, layer);
    }
    if (m_r.last) {
        add(p, "final norm", OpClass::norm, m_w.final_norm_elements * m_c.norm_s / 3 * m_overhead, -1);
        for (const predict::Gemm& h : m_w.head_gemms) add(p, "head", OpClass::gemm, gemm(h), -1, h);
        add(p, "loss", OpClass::loss, m_w.loss_elements * m_c.loss_s / 3 * m_overhead, -1);
    }
    if (m_cost.tp_vocab > 0)
        p.push_back({"tp all-reduce (vocabulary)", OpClass::all_reduce, m_cost.tp_vocab, kGroupTp});
    return p;
}

std::vector<Piece> ActionPieces::backward(bool input, bool weight) const {
    const double gemm_share = (input ? 0.5 : 0.0) + (weight ? 0.5 : 0.0);
    if (!m_detailed) {
        std::vector<Piece> p = coarse({{"GEMMs", OpClass::gemm, m_cost.gemm_b * gemm_share}}, 0, 0, 0, 0);
        if (!input) return p;
        std::vector<Piece> rest = coarse({{"recompute", OpClass::gemm, m_cost.recompute},
                                          {"attention", OpClass::attention, m_cost.attn_b + m_cost.contention_b},
                                          {"other ops", OpClass::activation, m_cost.other_b}},
                                         m_cost.tp_b, m_cost.ep_b, m_cost.cp_exposed_b, m_cost.cp_hidden * 2 / 3);
        p.insert(p.end(), rest.begin(), rest.end());
        return p;
    }
    std::vector<Piece> p;
    const std::string suffix = input && weight ? "" : input ? " (input grad)" : " (weight grad)";
    auto gemm_b = [&](const char* name, const predict::Gemm& g, int layer) {
        add(p, std::string(name) + suffix, OpClass::gemm, 2 * gemm(g) * gemm_share, layer, g, 2 * gemm_share);
    };
    if (m_r.last) {
        if (input) add(p, "loss", OpClass::loss, 2 * m_w.loss_elements * m_c.loss_s / 3 * m_overhead, -1);
        for (const predict::Gemm& h : m_w.head_gemms) gemm_b("head", h, -1);
        if (input) add(p, "final norm", OpClass::norm, 2 * m_w.final_norm_elements * m_c.norm_s / 3 * m_overhead, -1);
    }
    const double layers = double(std::max<int64_t>(1, m_r.layers));
    const double per_layer_tp =
        input ? (m_cost.tp_b - (m_l.recompute == Recompute::full ? m_cost.tp_f : 0)) / layers : 0;
    for (int64_t i = m_r.layers - 1; i >= 0; --i) {
        const int layer = int(std::min(m_m.layers - 1, m_first_layer + i));
        const bool moe = m_m.is_moe_layer(layer);
        const auto& g = moe ? m_w.moe_layer_gemms : m_w.layer_gemms;
        if (input && m_cost.recompute > 0) {
            add(p, m_l.recompute == Recompute::full ? "recompute layer" : "recompute scores", OpClass::attention,
                m_cost.recompute / layers, layer);
            if (m_l.recompute == Recompute::full) tp(p, tp_forward_per_layer(), layer);
        }
        if (input) tp(p, per_layer_tp / 2, layer);
        if (moe) {
            if (input) ep(p, "ep all-to-all: combine grad", layer);
            for (size_t k = g.size() - 1; k >= 3; --k) gemm_b(k == 3 ? "experts up" : "experts down", g[k], layer);
            if (input) ep(p, "ep all-to-all: dispatch grad", layer);
            gemm_b("router", g[2], layer);
        } else {
            gemm_b("mlp down", g[3], layer);
            if (input) add(p, m_m.swiglu ? "swiglu" : "gelu", OpClass::activation, 2 * elementwise_s() / 2, layer);
            gemm_b("mlp up", g[2], layer);
        }
        if (input) {
            add(p, "norm 2", OpClass::norm, 2 * norm_s(), layer);
            add(p, "residual", OpClass::activation, 2 * elementwise_s() / 2, layer);
            tp(p, per_layer_tp / 2, layer);
        }
        gemm_b("attention out", g[1], layer);
        if (input) {
            Piece attn{"attention", OpClass::attention, (m_cost.attn_b + m_cost.contention_b) / layers, -1, layer};
            if (m_l.parallel.cp > 1)
                attn.hidden_comm_s = m_cost.cp_hidden * 2 / 3 / layers, attn.hidden_group = kGroupCp,
                attn.hidden_name = "cp ring: key/value and gradient blocks";
            if (m_l.parallel.cp_comm ==
                CpComm::allgather) {  // gathered again before, the gradients reduce-scattered after
                const double gather = (m_cost.cp_exposed_b - m_cost.cp_scatter) / layers;
                if (gather > 0) p.push_back({exposed_cp_name(), exposed_cp_op(), gather, kGroupCp, layer});
                p.push_back(attn);
                if (m_cost.cp_scatter > 0)
                    p.push_back({"cp reduce-scatter (exposed)", OpClass::reduce_scatter, m_cost.cp_scatter / layers,
                                 kGroupCp, layer});
            } else {
                p.push_back(attn);
                if (m_cost.cp_exposed_b > 0)
                    p.push_back({exposed_cp_name(), exposed_cp_op(), m_cost.cp_exposed_b / layers, kGroupCp, layer});
            }
        }
        gemm_b("qkv", g[0], layer);
        if (input) add(p, "norm 1", OpClass::norm, 2 * norm_s(), layer);
    }
    if (m_r.first && input)
        add(p, "embedding", OpClass::embedding, 2 * m_w.embedding_elements * m_c.embedding_s / 3 * m_overhead, -1);
    return p;
}

double ActionPieces::gemm(const predict::Gemm& g) const {
    return g.count * g.flops() / (m_peak * m_c.gemm_eff(g.flops())) * m_overhead;
}

double ActionPieces::norm_s() const { return m_w.norm_elements / 2 * m_c.norm_s / 3 * m_overhead; }

double ActionPieces::elementwise_s() const { return m_w.elementwise_elements * m_c.elementwise_s / 3 * m_overhead; }

double ActionPieces::tp_forward_per_layer() const {
    return m_r.layers > 0 ? (m_cost.tp_f - m_cost.tp_vocab) / double(m_r.layers) : 0;
}

void ActionPieces::add(std::vector<Piece>& p, const std::string& name, OpClass op, double s, int layer,
                       const predict::Gemm& g, double flops_factor) const {
    Piece piece{name, op, s, -1, layer};
    if (op == OpClass::gemm) piece.flops = uint64_t(g.count * g.flops() * flops_factor);
    p.push_back(piece);
}

void ActionPieces::tp(std::vector<Piece>& p, double s, int layer) const {
    const ParallelLayout& pl = m_l.parallel;
    if (s <= 0) return;
    Piece c{pl.sp ? "tp all-gather / reduce-scatter" : "tp all-reduce",
            pl.sp ? OpClass::reduce_scatter : OpClass::all_reduce, s, kGroupTp, layer};
    c.bytes = uint64_t(2.0 * (pl.tp - 1) / pl.tp * double(m_r.T * m_m.hidden) * (m_l.bf16 ? 2 : 4));
    p.push_back(c);
}

void ActionPieces::ep(std::vector<Piece>& p, const char* name, int layer) const {
    const ParallelLayout& pl = m_l.parallel;
    if (pl.ep <= 1 || m_r.moe_layers == 0) return;
    Piece c{name, OpClass::all_to_all, (m_cost.ep_f / 2) / double(m_r.moe_layers), kGroupEp, layer};
    c.bytes = uint64_t(double(m_r.expert_rows) * double(m_m.hidden) * (m_l.bf16 ? 2 : 4) * (pl.ep - 1) / pl.ep);
    p.push_back(c);
}

std::vector<Piece> ActionPieces::coarse(std::vector<Piece> compute, double tp_s, double ep_s, double cp_exposed_s,
                                        double cp_hidden_s) const {
    if (cp_hidden_s > 0)
        for (Piece& c : compute)
            if (c.op == OpClass::attention)
                c.hidden_comm_s = cp_hidden_s, c.hidden_group = kGroupCp, c.hidden_name = "cp ring";
    if (tp_s > 0) compute.push_back({"tp collectives", OpClass::all_reduce, tp_s, kGroupTp});
    if (ep_s > 0) compute.push_back({"ep all-to-alls", OpClass::all_to_all, ep_s, kGroupEp});
    if (cp_exposed_s > 0) compute.push_back({exposed_cp_name(), exposed_cp_op(), cp_exposed_s, kGroupCp});
    return compute;
}

}  // namespace us::plan
