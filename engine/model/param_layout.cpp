#include "engine/model/param_layout.h"

#include <fmt/format.h>

namespace us {

void ParamLayout::add_unit(UnitKind kind, int layer,
                           const std::vector<std::pair<std::string, std::pair<int, int>>>& spec) {
    ParamUnit unit;
    unit.kind = kind;
    unit.layer = layer;
    unit.offset = m_total;
    unit.first_tensor = int(m_tensors.size());
    for (const auto& [name, shape] : spec) {
        ParamTensor t;
        t.name = name;
        t.unit = int(m_units.size());
        t.offset = m_total;
        t.rows = shape.first;
        t.cols = shape.second;
        t.numel = int64_t(t.rows) * t.cols;
        t.decay = t.cols > 1;  // matrices (and the embedding) decay; biases and norm parameters do not
        m_total += t.numel;
        m_tensors.push_back(std::move(t));
    }
    unit.numel = m_total - unit.offset;
    unit.tensor_count = int(m_tensors.size()) - unit.first_tensor;
    m_units.push_back(unit);
}

ParamLayout ParamLayout::build(const GPTConfig& cfg, const std::vector<std::pair<int, int>>& chunks) {
    US_ASSERT(!chunks.empty(), "a layout needs at least one chunk");
    bool final_norm = false, first = false;
    for (auto [b, e] : chunks) {
        US_ASSERT(0 <= b && b <= e && e <= cfg.layers, "layer range [{}, {})", b, e);
        final_norm |= e == cfg.layers;
        first |= b == 0;
    }
    const bool embedding = first || final_norm;
    ParamLayout p;
    const int C = cfg.hidden, V = cfg.vocab;
    p.m_chunks = chunks;
    p.m_layer_begin = chunks.front().first;
    p.m_layer_end = chunks.back().second;
    p.m_unit_of_layer.assign(size_t(cfg.layers), -1);
    if (embedding) {
        p.m_embedding_unit = int(p.m_units.size());
        p.add_unit(UnitKind::embedding, -1, {{"transformer.wte.weight", {V, C}}});
    }
    for (auto [layer_begin, layer_end] : chunks)
    for (int l = layer_begin; l < layer_end; ++l) {
        p.m_unit_of_layer[size_t(l)] = int(p.m_units.size());
        const std::string h = fmt::format("transformer.h.{}.", l);
        p.add_unit(UnitKind::block, l,
                   {{h + "ln_1.weight", {C, 1}},
                    {h + "ln_1.bias", {C, 1}},
                    {h + "attn.c_attn.weight", {3 * C, C}},
                    {h + "attn.c_attn.bias", {3 * C, 1}},
                    {h + "attn.c_proj.weight", {C, C}},
                    {h + "attn.c_proj.bias", {C, 1}},
                    {h + "ln_2.weight", {C, 1}},
                    {h + "ln_2.bias", {C, 1}},
                    {h + "mlp.c_fc.weight", {4 * C, C}},
                    {h + "mlp.c_fc.bias", {4 * C, 1}},
                    {h + "mlp.c_proj.weight", {C, 4 * C}},
                    {h + "mlp.c_proj.bias", {C, 1}}});
    }
    if (final_norm) {
        p.m_final_unit = int(p.m_units.size());
        p.add_unit(UnitKind::final_norm, -1, {{"transformer.ln_f.weight", {C, 1}}, {"transformer.ln_f.bias", {C, 1}}});
    }
    return p;
}

const ParamTensor* ParamLayout::find(const std::string& name) const {
    for (const auto& t : m_tensors)
        if (t.name == name) return &t;
    return nullptr;
}

int ParamLayout::block_unit(int layer) const {
    return layer >= 0 && size_t(layer) < m_unit_of_layer.size() ? m_unit_of_layer[size_t(layer)] : -1;
}

BlockParams block_params(Tensor s, int C) {
    BlockParams p;
    int64_t o = 0;
    auto take = [&](int64_t n) {
        Tensor t = s.slice(o, n);
        o += n;
        return t;
    };
    const int64_t CC = int64_t(C) * C;
    p.ln1_w = take(C);
    p.ln1_b = take(C);
    p.qkv_w = take(3 * CC);
    p.qkv_b = take(3 * C);
    p.attproj_w = take(CC);
    p.attproj_b = take(C);
    p.ln2_w = take(C);
    p.ln2_b = take(C);
    p.fc_w = take(4 * CC);
    p.fc_b = take(4 * C);
    p.fcproj_w = take(4 * CC);
    p.fcproj_b = take(C);
    US_ASSERT(o == s.numel, "block unit holds {} elements, expected {}", s.numel, o);
    return p;
}

}  // namespace us
