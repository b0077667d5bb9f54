// A prediction as JSON (`ultrascope predict --json`, and the report's "predicted" section; docs/report-schema.md).
#include "common/core/memory_category.h"
#include "profiler/predict/predict.h"

namespace us::predict {

nlohmann::json prediction_json(const PredictInput& in, const Prediction& p) {
    nlohmann::json mem = nlohmann::json::object(), formula = nlohmann::json::object();
    for (int c = 0; c < kMemCategoryCount; ++c) {
        mem[std::string(kMemCategoryNames[c])] =
            p.memory[size_t(c)] ? nlohmann::json(*p.memory[size_t(c)]) : nlohmann::json();
        formula[std::string(kMemCategoryNames[c])] =
            p.memory_formula[size_t(c)] ? nlohmann::json(*p.memory_formula[size_t(c)]) : nlohmann::json();
    }
    nlohmann::json comm = nlohmann::json::object();
    for (int g = 0; g < prof::kGroupCount; ++g)
        comm[std::string(prof::group_kind_name(prof::GroupKind(g)))] = p.comm_bytes[size_t(g)];
    auto list = [](const std::vector<PredictedCollective>& v) {
        nlohmann::json out = nlohmann::json::array();
        for (const PredictedCollective& c : v)
            out.push_back({{"what", c.what},
                           {"op", std::string(prof::kOpClassNames[size_t(c.op)])},
                           {"bytes", c.bytes},
                           {"count", c.count}});
        return out;
    };
    const nlohmann::json tp = list(p.tp_collectives);
    return {{"params", p.params},
            {"active_params", p.active_params},
            {"params_on_rank", p.params_on_rank},
            {"expert_params_on_rank", p.expert_params_on_rank},
            {"activations_per_moe_layer_bytes", p.activations_per_moe_layer},
            {"moe_rows_per_layer", p.moe_rows_per_layer},
            {"ep_collectives_per_step", list(p.ep_collectives)},
            {"ep_comm_bytes_per_step_formula", p.ep_comm_bytes_formula},
            {"comm_bytes_per_step", comm},
            {"tp_collectives_per_step", tp},
            {"cp_collectives_per_step", list(p.cp_collectives)},
            {"tp_comm_bytes_per_step_formula", p.tp_comm_bytes_formula},
            {"activations_per_layer_formula_bytes", p.activations_per_layer_formula},
            {"activations_per_layer_formula", p.activations_formula},
            {"memory_bytes", mem},
            {"memory_formula_bytes", formula},
            {"memory_total_bytes", p.memory_total()},
            {"activations_per_layer_bytes", p.activations_per_layer},
            {"micro_batches_in_flight", p.micro_batches_in_flight},
            {"flops_per_token_formula", p.flops_per_token},
            {"tokens_per_step", p.tokens_per_step},
            {"dp_comm_bytes_per_step", p.dp_comm_bytes},
            {"pp_comm_bytes_per_step", p.pp_comm_bytes},
            {"bubble_fraction_formula", p.bubble_theory},
            {"bubble_fraction_predicted", p.bubble_simulated},
            {"bubble_formula", p.bubble_formula}};
}

}  // namespace us::predict
