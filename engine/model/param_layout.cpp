#include "engine/model/param_layout.h"

#include <fmt/format.h>

#include <algorithm>

namespace us {

struct ParamLayout::TensorSpec {
    std::string name;
    int rows, cols;  // whole tensor
    TpSplit split = TpSplit::replicated;
    int row_groups = 1;
};

void ParamLayout::add_unit(UnitKind kind, int layer, const std::vector<TensorSpec>& spec) {
    ParamUnit unit;
    unit.kind = kind;
    unit.layer = layer;
    unit.offset = m_total;
    unit.first_tensor = int(m_tensors.size());
    const int tp = m_tp.tp;
    for (const TensorSpec& sp : spec) {
        ParamTensor t;
        t.name = sp.name;
        t.unit = int(m_units.size());
        t.offset = m_total;
        t.whole_rows = sp.rows;
        t.whole_cols = sp.cols;
        t.split = sp.split;
        t.expert = m_experts;
        t.grad_from_all_rows = sp.name.size() >= 13 && sp.name.compare(sp.name.size() - 13, 13, "router.weight") == 0;
        t.row_groups = sp.row_groups;
        t.rows = sp.rows;
        t.cols = sp.cols;
        switch (sp.split) {
            case TpSplit::replicated:
                break;
            case TpSplit::rows:
                US_ASSERT(sp.rows % (tp * sp.row_groups) == 0, "{}: {} rows over tp {}", sp.name, sp.rows, tp);
                t.rows = sp.rows / tp;
                break;
            case TpSplit::cols:
                US_ASSERT(sp.cols % tp == 0, "{}: {} columns over tp {}", sp.name, sp.cols, tp);
                t.cols = sp.cols / tp;
                break;
            case TpSplit::vocab:
                t.rows = m_vocab_rows;
                break;
        }
        t.numel = int64_t(t.rows) * t.cols;
        t.decay = sp.cols > 1;  // matrices and the embedding decay; biases and norm parameters do not
        m_total += t.numel;
        m_tensors.push_back(std::move(t));
    }
    unit.numel = m_total - unit.offset;
    unit.tensor_count = int(m_tensors.size()) - unit.first_tensor;
    m_units.push_back(unit);
}

ParamLayout ParamLayout::build(const GPTConfig& cfg, const std::vector<std::pair<int, int>>& chunks, TpPlacement tp) {
    US_ASSERT(!chunks.empty(), "a layout needs at least one chunk");
    US_ASSERT(tp.tp >= 1 && tp.rank >= 0 && tp.rank < tp.tp, "tp rank {} of {}", tp.rank, tp.tp);
    bool final_norm = false, first = false;
    for (auto [b, e] : chunks) {
        US_ASSERT(0 <= b && b <= e && e <= cfg.layers, "layer range [{}, {})", b, e);
        final_norm |= e == cfg.layers;
        first |= b == 0;
    }
    const bool embedding = first || final_norm;
    ParamLayout p;
    const int C = cfg.hidden, V = cfg.vocab;
    p.m_tp = tp;
    p.m_vocab_rows = (V + tp.tp - 1) / tp.tp;  // ceil(V / tp): the vocabulary is padded to tp * that
    p.m_vocab_valid = std::clamp(V - tp.rank * p.m_vocab_rows, 0, p.m_vocab_rows);
    p.m_chunks = chunks;
    p.m_layer_begin = chunks.front().first;
    p.m_layer_end = chunks.back().second;
    p.m_unit_of_layer.assign(size_t(cfg.layers), -1);
    using S = TpSplit;
    if (embedding) {
        p.m_embedding_unit = int(p.m_units.size());
        p.add_unit(UnitKind::embedding, -1, {{"transformer.wte.weight", V, C, S::vocab}});
    }
    for (auto [layer_begin, layer_end] : chunks)
        for (int l = layer_begin; l < layer_end; ++l) {
            p.m_unit_of_layer[size_t(l)] = int(p.m_units.size());
            const std::string h = fmt::format("transformer.h.{}.", l);
            std::vector<TensorSpec> spec = {{h + "ln_1.weight", C, 1},
                                            {h + "ln_1.bias", C, 1},
                                            {h + "attn.c_attn.weight", 3 * C, C, S::rows, 3},
                                            {h + "attn.c_attn.bias", 3 * C, 1, S::rows, 3},
                                            {h + "attn.c_proj.weight", C, C, S::cols},
                                            {h + "attn.c_proj.bias", C, 1},
                                            {h + "ln_2.weight", C, 1},
                                            {h + "ln_2.bias", C, 1}};
            if (cfg.is_moe_layer(l)) {  // the experts are in build_experts' layout
                spec.push_back({h + "mlp.router.weight", cfg.moe_experts, C});  // whole on every tp rank
            } else {
                spec.insert(spec.end(), {{h + "mlp.c_fc.weight", 4 * C, C, S::rows},
                                         {h + "mlp.c_fc.bias", 4 * C, 1, S::rows},
                                         {h + "mlp.c_proj.weight", C, 4 * C, S::cols},
                                         {h + "mlp.c_proj.bias", C, 1}});
            }
            p.add_unit(UnitKind::block, l, spec);
        }
    if (final_norm) {
        p.m_final_unit = int(p.m_units.size());
        p.add_unit(UnitKind::final_norm, -1, {{"transformer.ln_f.weight", C, 1}, {"transformer.ln_f.bias", C, 1}});
    }
    return p;
}

ParamLayout ParamLayout::build_experts(const GPTConfig& cfg, const std::vector<std::pair<int, int>>& chunks,
                                       TpPlacement tp, EpPlacement ep) {
    US_ASSERT(ep.ep >= 1 && ep.rank >= 0 && ep.rank < ep.ep, "ep rank {} of {}", ep.rank, ep.ep);
    ParamLayout p;
    const int C = cfg.hidden;
    p.m_tp = tp;
    p.m_experts = true;
    p.m_local_experts = cfg.is_moe() ? cfg.moe_experts / ep.ep : 0;
    p.m_first_expert = ep.rank * p.m_local_experts;
    p.m_chunks = chunks;
    p.m_layer_begin = chunks.front().first;
    p.m_layer_end = chunks.back().second;
    p.m_unit_of_layer.assign(size_t(cfg.layers), -1);
    using S = TpSplit;
    for (auto [layer_begin, layer_end] : chunks)
        for (int l = layer_begin; l < layer_end; ++l) {
            if (!cfg.is_moe_layer(l)) continue;
            p.m_unit_of_layer[size_t(l)] = int(p.m_units.size());
            std::vector<TensorSpec> spec;
            for (int e = p.m_first_expert; e < p.m_first_expert + p.m_local_experts; ++e) {
                const std::string x = fmt::format("transformer.h.{}.mlp.experts.{}.", l, e);
                spec.insert(spec.end(), {{x + "c_fc.weight", 4 * C, C, S::rows},
                                         {x + "c_fc.bias", 4 * C, 1, S::rows},
                                         {x + "c_proj.weight", C, 4 * C, S::cols},
                                         {x + "c_proj.bias", C, 1}});
            }
            p.add_unit(UnitKind::experts, l, spec);
        }
    return p;
}

namespace {

// Calls fn(shard_index, whole_index) for every element of the rank's shard; whole_index is -1 for padding.
template <typename Fn>
void for_each_shard_element(const ParamTensor& t, const TpPlacement& tp, Fn&& fn) {
    const int64_t cols = t.cols;
    for (int64_t r = 0; r < t.rows; ++r) {
        int64_t whole_row = r;
        int64_t col0 = 0;
        switch (t.split) {
            case TpSplit::replicated:
                break;
            case TpSplit::rows: {  // group g's rows [g * group, (g + 1) * group) split evenly over the ranks
                const int64_t local_group = t.rows / t.row_groups, group = local_group * tp.tp;
                whole_row = (r / local_group) * group + tp.rank * local_group + r % local_group;
                break;
            }
            case TpSplit::cols:
                col0 = int64_t(tp.rank) * t.cols;
                break;
            case TpSplit::vocab:
                whole_row = int64_t(tp.rank) * t.rows + r;
                break;
        }
        const bool padding = whole_row >= t.whole_rows;
        for (int64_t c = 0; c < cols; ++c)
            fn(r * cols + c, padding ? int64_t(-1) : whole_row * t.whole_cols + col0 + c);
    }
}

}  // namespace

void take_shard(const ParamTensor& t, const TpPlacement& tp, const float* whole, float* shard) {
    for_each_shard_element(t, tp, [&](int64_t s, int64_t w) { shard[s] = w < 0 ? 0.0f : whole[w]; });
}

void place_shard(const ParamTensor& t, const TpPlacement& tp, const float* shard, float* whole) {
    for_each_shard_element(t, tp, [&](int64_t s, int64_t w) {
        if (w >= 0) whole[w] = shard[s];
    });
}

const ParamTensor* ParamLayout::find(const std::string& name) const {
    for (const auto& t : m_tensors)
        if (t.name == name) return &t;
    return nullptr;
}

int ParamLayout::block_unit(int layer) const {
    return layer >= 0 && size_t(layer) < m_unit_of_layer.size() ? m_unit_of_layer[size_t(layer)] : -1;
}

BlockParams block_params(Tensor s, int C, int tp, int moe_experts) {
    BlockParams p;
    int64_t o = 0;
    auto take = [&](int64_t n) {
        Tensor t = s.slice(o, n);
        o += n;
        return t;
    };
    const int64_t Ca = C / tp, F = 4 * int64_t(C) / tp;  // the rank's attention width and MLP width
    p.ln1_w = take(C);
    p.ln1_b = take(C);
    p.qkv_w = take(3 * Ca * C);
    p.qkv_b = take(3 * Ca);
    p.attproj_w = take(C * Ca);
    p.attproj_b = take(C);
    p.ln2_w = take(C);
    p.ln2_b = take(C);
    if (moe_experts > 0) {
        p.router_w = take(int64_t(moe_experts) * C);
    } else {
        p.fc_w = take(F * C);
        p.fc_b = take(F);
        p.fcproj_w = take(C * F);
        p.fcproj_b = take(C);
    }
    US_ASSERT(o == s.numel, "block unit holds {} elements, expected {}", s.numel, o);
    return p;
}

ExpertParams expert_params(Tensor s, int C, int tp, int e) {
    const int64_t F = 4 * int64_t(C) / tp, per_expert = 2 * F * C + F + C;
    int64_t o = per_expert * e;
    auto take = [&](int64_t n) {
        Tensor t = s.slice(o, n);
        o += n;
        return t;
    };
    ExpertParams p;
    p.fc_w = take(F * C);
    p.fc_b = take(F);
    p.fcproj_w = take(C * F);
    p.fcproj_b = take(C);
    return p;
}

}  // namespace us
