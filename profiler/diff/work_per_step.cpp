// The tokens each run trains in a step, and per second (work_per_step.h).
#include "profiler/diff/work_per_step.h"

#include <fmt/format.h>

namespace us::prof {

std::optional<int64_t> tokens_per_step(const nlohmann::json& settings) {
    if (!settings.is_object()) return std::nullopt;
    int64_t tokens = 1;
    for (const char* key : {"batch", "seq", "grad_accum", "dp"}) {
        const auto it = settings.find(key);
        if (it == settings.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) return std::nullopt;
        tokens *= it->get<int64_t>();
    }
    return tokens;
}

std::optional<WorkPerStep> work_per_step(const nlohmann::json& a_settings, const nlohmann::json& b_settings,
                                         double a_step_ms, double b_step_ms) {
    const auto a = tokens_per_step(a_settings), b = tokens_per_step(b_settings);
    if (!a || !b || *a == *b || a_step_ms <= 0 || b_step_ms <= 0) return std::nullopt;
    return WorkPerStep{*a, *b, double(*a) / (a_step_ms / 1e3), double(*b) / (b_step_ms / 1e3)};
}

std::string work_words(const WorkPerStep& w) {
    const double change = 100 * (w.b_tokens_per_s / w.a_tokens_per_s - 1);
    return fmt::format("; B trains {:.2f}x the tokens a step ({} -> {}): {:.0f} -> {:.0f} tokens/s, {:+.1f}% (derived)",
                       double(w.b_tokens) / double(w.a_tokens), w.a_tokens, w.b_tokens, w.a_tokens_per_s,
                       w.b_tokens_per_s, change);
}

}  // namespace us::prof
