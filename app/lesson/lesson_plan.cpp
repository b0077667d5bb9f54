// A lesson's planner evaluation: the lesson's model and layout on a cluster of GPUs, through the planner's own API
// (app/plan/planner.h), so a lesson can put the prediction for a cluster next to the run it measured here.
#include "app/lesson/lesson.h"
#include "app/plan/planner.h"
#include "common/core/check.h"
#include "common/settings/cli.h"

namespace us::lesson {

std::string plan_command_text(const LessonPlan& plan) {
    std::string s = "ultrascope plan --gpu " + plan.gpu;
    for (const auto& a : plan.args) s += " " + a;
    return s;
}

nlohmann::json evaluate_lesson_plan(const LessonPlan& plan) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : plan.args) argv.push_back(a.c_str());
    ParsedTrainArgs parsed = parse_train_args(int(argv.size()), argv.data());
    US_CHECK_INPUT(!parsed.help_requested, "--help is not a plan setting");
    const TrainConfig& cfg = parsed.cmd.config;
    const GPTConfig& g = cfg.model;
    g.validate();
    const predict::ModelDesc model =
        predict::engine_model(cfg.preset.empty() ? "engine-gpt" : cfg.preset, g.vocab, g.hidden, g.layers, g.heads,
                              g.seq, g.moe_experts, g.moe_topk, g.moe_every, cfg.moe_capacity_factor);
    const predict::ClusterDesc cluster = predict::load_cluster(plan.gpu);
    predict::Layout layout = predict::layout_from_config(cfg);
    layout.bf16 = cfg.precision == Precision::bf16;
    layout.flash = attention_blockwise(cfg.attention);
    predict::check_layout(model, cluster, layout, layout.world());
    nlohmann::json out = predict::plan_json(model, cluster, predict::evaluate(model, cluster, layout));
    out["model"] = predict::model_to_json(model);
    out["cluster"] = cluster.name;
    return out;
}

}  // namespace us::lesson
