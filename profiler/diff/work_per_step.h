// The work each run does in a step: the tokens its step trains (batch x seq x grad_accum x dp, from its settings).
// A step of twice the tokens is expected to take longer: where the runs' steps train different numbers of tokens,
// the step time alone misleads ("B is 202% slower per step" for 4x the tokens and +33% tokens/s), so the diff sets
// the tokens per second beside it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace us::prof {

struct WorkPerStep {
    int64_t a_tokens = 0, b_tokens = 0;             // per step, from the settings
    double a_tokens_per_s = 0, b_tokens_per_s = 0;  // derived: tokens per step over the measured step
};

// The tokens a step trains per the engine's settings; nullopt where they do not say (an imported trace).
std::optional<int64_t> tokens_per_step(const nlohmann::json& settings);

// Where both runs' settings say their tokens and they differ; nullopt otherwise.
std::optional<WorkPerStep> work_per_step(const nlohmann::json& a_settings, const nlohmann::json& b_settings,
                                         double a_step_ms, double b_step_ms);

// "; B trains 4.00x the tokens a step (2048 -> 8192): 4987 -> 6597 tokens/s, +32.3% (derived)".
std::string work_words(const WorkPerStep& w);

}  // namespace us::prof
