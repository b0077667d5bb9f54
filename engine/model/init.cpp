#include "engine/model/init.h"

#include <cmath>
#include <string_view>
#include <vector>

#include "common/core/rng.h"

namespace us {

namespace {
uint64_t fnv1a(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}
bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

void init_param_tensor(const ParamTensor& t, const TpPlacement& tp, const GPTConfig& cfg, uint64_t seed, float* out) {
    const std::string_view name = t.name;
    const bool norm = name.find(".ln_") != std::string_view::npos;
    if (ends_with(name, ".bias")) {
        for (int64_t i = 0; i < t.numel; ++i) out[i] = 0.0f;
        return;
    }
    if (norm) {  // LayerNorm weight
        for (int64_t i = 0; i < t.numel; ++i) out[i] = 1.0f;
        return;
    }
    double std = 0.02;
    // the residual branches' output projections: attention's, the MLP's and each expert's
    if (ends_with(name, "c_proj.weight")) std = 0.02 / std::sqrt(2.0 * cfg.layers);
    Rng rng(seed * 0x9e3779b97f4a7c15ull ^ fnv1a(name));
    const bool whole = t.split == TpSplit::replicated || tp.tp == 1;
    std::vector<float> values(whole ? 0 : size_t(t.whole_numel()));
    float* dst = whole ? out : values.data();
    for (int64_t i = 0; i < t.whole_numel(); ++i) dst[i] = float(std * rng.next_normal());
    if (!whole) take_shard(t, tp, values.data(), out);
}

}  // namespace us
