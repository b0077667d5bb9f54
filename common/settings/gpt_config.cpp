#include "common/settings/gpt_config.h"

#include <algorithm>

#include "common/core/check.h"
#include "common/settings/model_bounds.h"

namespace us {

int GPTConfig::moe_layers() const {
    int n = 0;
    for (int l = 0; l < layers; ++l) n += is_moe_layer(l);
    return n;
}

namespace {
int64_t params_with_experts(const GPTConfig& c, int64_t experts) {
    const int64_t h = c.hidden, v = c.vocab, L = c.layers, M = c.moe_layers();
    const int64_t dense_block = 12 * h * h + 13 * h,
                  moe_block = 4 * h * h + 8 * h + h * c.moe_experts + experts * (8 * h * h + 5 * h);
    return h * v + (L - M) * dense_block + M * moe_block + 2 * h;
}
}  // namespace

int64_t GPTConfig::num_params() const { return params_with_experts(*this, moe_experts); }
int64_t GPTConfig::active_params() const { return params_with_experts(*this, is_moe() ? moe_topk : 0); }

void GPTConfig::validate() const {
    US_CHECK_INPUT(vocab > 0, "--vocab must be positive (got {})", vocab);
    US_CHECK_INPUT(vocab >= 256, "--vocab {} is too small for the byte-level tokenizer: use at least 256", vocab);
    US_CHECK_INPUT(hidden > 0, "--hidden must be positive (got {})", hidden);
    US_CHECK_INPUT(layers > 0, "--layers must be positive (got {})", layers);
    US_CHECK_INPUT(heads > 0, "--heads must be positive (got {})", heads);
    US_CHECK_INPUT(seq > 0, "--seq must be positive (got {})", seq);
    const auto at_most = [](const char* flag, int64_t v, int64_t most) {
        US_CHECK_INPUT(v <= most, "{} {} is beyond any model this tool sizes: at most {}", flag, v, most);
    };
    at_most("--vocab", vocab, model_bounds::vocab);
    at_most("--hidden", hidden, model_bounds::hidden);
    at_most("--layers", layers, model_bounds::layers);
    at_most("--heads", heads, model_bounds::heads);
    at_most("--seq", seq, model_bounds::seq);
    at_most("--moe-experts", moe_experts, model_bounds::experts);
    // and the whole: an MoE model at every bound above would count 2e18 parameters, its bytes past 2^63
    const double h = hidden, experts = std::max(1, moe_experts);
    const double params = double(vocab) * h + double(layers) * (4 * h * h + 8 * h * h * experts);
    US_CHECK_INPUT(params <= model_bounds::params,
                   "the model counts about {:.3g} parameters, beyond any model this tool sizes (at most {:.0e}): "
                   "lower --hidden, --layers or --moe-experts",
                   params, model_bounds::params);
    US_CHECK_INPUT(hidden % heads == 0, "--hidden {} is not divisible by --heads {}: pick heads that divide it", hidden,
                   heads);
    US_CHECK_INPUT(head_dim() % 2 == 0, "head dim {} (--hidden / --heads) must be even for rotary embeddings",
                   head_dim());
    US_CHECK_INPUT(moe_experts >= 0, "--moe-experts must not be negative (got {}); 0 is the dense model", moe_experts);
    if (is_moe()) {
        US_CHECK_INPUT(moe_topk >= 1 && moe_topk <= moe_experts,
                       "--moe-topk {} must be between 1 and --moe-experts {}: each token goes to K of the E experts",
                       moe_topk, moe_experts);
        US_CHECK_INPUT(moe_every >= 1 && moe_every <= layers,
                       "--moe-every {} must be between 1 and --layers {} (every M-th block is an MoE block)", moe_every,
                       layers);
    }
}

std::string_view precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

std::string_view recompute_name(Recompute r) {
    return r == Recompute::none ? "none" : r == Recompute::selective ? "selective" : "full";
}

Precision parse_precision(std::string_view text) {
    if (text == "fp32") return Precision::fp32;
    if (text == "bf16") return Precision::bf16;
    fail_user("unknown --precision '{}': expected fp32 or bf16", text);
}

std::string_view attention_name(Attention a) {
    return a == Attention::flash ? "flash" : a == Attention::cudnn ? "cudnn" : "naive";
}

Attention parse_attention(std::string_view text) {
    if (text == "naive") return Attention::naive;
    if (text == "flash") return Attention::flash;
    if (text == "cudnn") return Attention::cudnn;
    fail_user(
        "unknown --attention '{}': expected naive (stores the probabilities), flash (blockwise, online "
        "softmax) or cudnn (flash through cuDNN's fused attention, --device cuda)",
        text);
}

Recompute parse_recompute(std::string_view text) {
    if (text == "none") return Recompute::none;
    if (text == "selective") return Recompute::selective;
    if (text == "full") return Recompute::full;
    fail_user("unknown --recompute '{}': expected none, selective or full", text);
}

}  // namespace us
