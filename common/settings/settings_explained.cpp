#include "common/settings/settings_explained.h"

#include <fmt/format.h>

#include <utility>

#include "common/settings/settings_schema.h"

namespace us {

namespace {

// A choice's values, one a line, each with its help line from the value's name table.
template <typename E, size_t N>
std::string choices_explained(const EnumTable<E, N>& table) {
    std::string s;
    for (const EnumName<E>& e : table) s += fmt::format("{}{}: {}", s.empty() ? "" : "\n", e.name, e.help);
    return s;
}

const std::vector<std::pair<std::string_view, std::string_view>>& explanations() {
    static const std::string schedules = choices_explained(kPipelineSchedules);
    static const std::string cp_comms = choices_explained(kCpComms), cp_balances = choices_explained(kCpBalances);
    static const std::vector<std::pair<std::string_view, std::string_view>> table = {
        {"grad_accum", "gradient accumulation per optimizer step, and m of the pipeline"},
        {"pp", "pipeline stages: the layers split evenly, embedding on the first, head and loss on the last"},
        {"pp_schedule", schedules},
        {"pp_chunks", "virtual stages per rank (interleaved); layers must divide by pp x chunks"},
        {"tp",
         "each block's attention heads and MLP split over tp ranks (Megatron), with an all-reduce per branch in\n"
         "forward and in backward on the critical path; heads must divide by tp"},
        {"sp",
         "LayerNorms and residuals on seq/tp positions per rank; all-gather before and reduce-scatter after the\n"
         "tensor-parallel layers; activations / tp"},
        {"cp",
         "each sequence split over cp ranks; attention sees every rank's keys and values (a ring or an\n"
         "all-gather, --cp-comm); activations / cp"},
        {"cp_comm", cp_comms},
        {"cp_balance", cp_balances},
        {"moe_experts", "each a 4h GeLU MLP; a router sends each token to K of them"},
        {"moe_topk", "the gates are the K probabilities renormalised"},
        {"moe_capacity_factor",
         "per micro-batch on each rank; a dropped token keeps its residual. The panel's slider at 0 reads "
         "dropless"},
        {"moe_aux_loss_coef", "the Switch load-balancing loss coef x E x sum_i f_i P_i"},
        {"ep",
         "carved out of dp: each rank holds E/ep experts of every MoE block and exchanges token rows with the\n"
         "others in two all-to-alls per MoE block each way"},
        {"save", "written atomically: a crash never leaves a half-written one"},
        {"load", "keep --steps the same as the interrupted run's and it continues bitwise as if it had never stopped"},
        {"overlap",
         "checked: each gradient bucket's all-reduce starts as soon as backward has filled it and runs under the\n"
         "rest of backward; unchecked passes --no-overlap"},
        {"attention",
         "naive's stored probabilities are the 5as/h term of the activation formula; with flash the s^2 term\n"
         "disappears, for the price of recomputing the scores in backward"},
    };
    return table;
}

}  // namespace

std::string_view setting_explanation(std::string_view key) {
    for (const auto& [k, text] : explanations())
        if (k == key) return text;
    return {};
}

std::vector<std::string_view> explained_settings() {
    std::vector<std::string_view> keys;
    for (const auto& [k, text] : explanations()) keys.push_back(k);
    return keys;
}

std::string setting_tooltip(std::string_view key) {
    const Setting& s = setting(key);
    const std::string_view more = setting_explanation(key);
    std::string tip = fmt::format("{} ({})", s.help, s.flag);
    if (!more.empty()) tip += fmt::format("\n{}", more);
    return tip;
}

}  // namespace us
