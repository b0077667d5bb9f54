#include "app/gui/model/launch_settings.h"

#include "common/core/check.h"
#include "common/settings/cli.h"

namespace us::gui {

namespace {

TrainConfig parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : args) argv.push_back(a.c_str());
    TrainConfig c = parse_train_args(int(argv.size()), argv.data()).cmd.config;
    // --global-batch has been turned into micro-batches; from here the panel's micro-batches field owns them.
    c.global_batch = 0;
    return c;
}

}  // namespace

TrainConfig preset_config(const std::string& name) {
    if (name.empty()) return TrainConfig{};
    try {
        return parse({"--preset", name});
    } catch (const UserError&) {  // not a preset of this installation
        return TrainConfig{};
    }
}

Applicable applicable(const TrainConfig& c) {
    Applicable a;
    a.schedule = c.parallel.pp > 1;
    a.chunks = a.schedule && c.parallel.pp_schedule == "interleaved";
    a.sp = c.parallel.tp > 1;
    a.cp_balance = c.parallel.cp > 1;
    a.experts = c.model.moe_experts > 0;
    a.save_every = !c.save.empty();
    return a;
}

TrainConfig LaunchSettings::effective() const {
    const Applicable a = applicable(config);
    const TrainConfig preset = preset_config(config.preset);
    TrainConfig c = config;
    ParallelConfig& p = c.parallel;
    if (!a.schedule) p.pp_schedule = "1f1b";
    if (!a.chunks) p.pp_chunks = 1;
    if (!a.sp) p.sp = false;
    if (!a.cp_balance) p.cp_balance = preset.parallel.cp_balance;
    if (!a.experts) {
        c.model.moe_topk = preset.model.moe_topk;
        c.model.moe_every = preset.model.moe_every;
        c.moe_capacity_factor = preset.moe_capacity_factor;
        c.moe_aux_loss_coef = preset.moe_aux_loss_coef;
        p.ep = 1;
    }
    if (!a.save_every) c.save_every = 0;
    return c;
}

LaunchSettings LaunchSettings::from_args(const std::vector<std::string>& args) {
    LaunchSettings s;
    s.config = parse(args);
    return s;
}

LaunchSettings LaunchSettings::from_config(const nlohmann::json& config) {
    LaunchSettings s;
    apply_config_json(s.config, config, "the trace's settings");  // every setting but the preset's name
    if (config.contains("preset") && config["preset"].is_string()) s.config.preset = config["preset"].get<std::string>();
    const TrainConfig defaults;
    s.config.threads = defaults.threads;
    s.config.device = defaults.device;
    s.config.parallel.comm_progress = defaults.parallel.comm_progress;
    s.config.trace = defaults.trace;  // the launcher picks the trace file and the stream
    s.config.connect = defaults.connect;
    s.config.global_batch = 0;        // already resolved into grad_accum
    if (preset_config(s.config.preset).preset != s.config.preset) s.config.preset.clear();  // unknown here
    return s;
}

void LaunchSettings::set_preset(const std::string& name) {
    if (name == config.preset) return;
    // The settings edited away from the old preset, replayed on the new one.
    std::vector<std::string> args = {"--preset", name};
    try {
        const auto edited = train_args_of(config, preset_config(config.preset));
        args.insert(args.end(), edited.begin(), edited.end());
        config = parse(args);
    } catch (const UserError&) {  // an edit the new preset cannot take (a switch it already sets): start from it
        config = preset_config(name);
    }
}

std::vector<std::string> LaunchSettings::train_args() const {
    std::vector<std::string> args;
    if (!config.preset.empty()) args = {"--preset", config.preset};
    const auto flags = train_args_of(effective(), preset_config(config.preset));
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
}

TrainConfig LaunchSettings::resolve() const {
    // Through the arguments, not the struct: what is checked is exactly what the ranks will parse.
    TrainConfig c = parse(train_args());
    c.validate();
    validate_layout(c.parallel, c.parallel.world());
    return c;
}

std::string LaunchSettings::problem() const {
    try {
        resolve();
    } catch (const UserError& e) {
        return e.what();
    }
    return {};
}

bool LaunchSettings::operator==(const LaunchSettings& o) const {
    return hosts == o.hosts && config.to_json() == o.config.to_json();
}

}  // namespace us::gui
