#include "engine/model/gpt_config.h"

#include "engine/core/check.h"

namespace us {

int64_t GPTConfig::num_params() const {
    const int64_t h = hidden, v = vocab, L = layers;
    return h * v + L * (12 * h * h + 13 * h) + 2 * h;
}

void GPTConfig::validate() const {
    US_CHECK_INPUT(vocab > 0, "--vocab must be positive (got {})", vocab);
    US_CHECK_INPUT(vocab >= 256, "--vocab {} is too small for the byte-level tokenizer: use at least 256", vocab);
    US_CHECK_INPUT(hidden > 0, "--hidden must be positive (got {})", hidden);
    US_CHECK_INPUT(layers > 0, "--layers must be positive (got {})", layers);
    US_CHECK_INPUT(heads > 0, "--heads must be positive (got {})", heads);
    US_CHECK_INPUT(seq > 0, "--seq must be positive (got {})", seq);
    US_CHECK_INPUT(hidden % heads == 0, "--hidden {} is not divisible by --heads {}: pick heads that divide it",
                   hidden, heads);
    US_CHECK_INPUT(head_dim() % 2 == 0, "head dim {} (--hidden / --heads) must be even for rotary embeddings",
                   head_dim());
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

Recompute parse_recompute(std::string_view text) {
    if (text == "none") return Recompute::none;
    if (text == "selective") return Recompute::selective;
    if (text == "full") return Recompute::full;
    fail_user("unknown --recompute '{}': expected none, selective or full", text);
}

}  // namespace us
