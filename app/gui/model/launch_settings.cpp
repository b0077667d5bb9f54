#include "app/gui/model/launch_settings.h"

#include <fmt/format.h>

#include "common/core/check.h"
#include "common/core/format.h"
#include "common/settings/cli.h"
#include "common/settings/settings_schema.h"
#include "profiler/predict/predict.h"

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

// Read off the settings table's `applies` (settings_schema.cpp): the panel greys out what the table says does nothing.
Applicable applicable(const TrainConfig& c) {
    auto applies = [&](std::string_view key) { return setting_applies(setting(key), c); };
    Applicable a;
    a.schedule = applies("pp_schedule");
    a.chunks = applies("pp_chunks");
    a.sp = applies("sp");
    a.cp_balance = applies("cp_balance");
    a.experts = applies("moe_topk");
    a.save_every = applies("save_every");
    return a;
}

TrainConfig LaunchSettings::effective() const {
    const TrainConfig preset = preset_config(config.preset);
    TrainConfig c = config;
    for (const Setting& s : settings_schema())
        if (!setting_applies(s, config)) s.set(c, s.get(preset));  // back at the preset's value
    // With no pipeline, the schedule that runs a micro-batch at a time, whatever the preset's.
    if (!setting_applies(setting("pp_schedule"), config)) c.parallel.pp_schedule = PipelineSchedule::one_f_one_b;
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
    if (config.contains("preset") && config["preset"].is_string())
        s.config.preset = config["preset"].get<std::string>();
    const TrainConfig defaults;
    s.config.threads = defaults.threads;
    s.config.device = defaults.device;
    s.config.runtime.comm_progress = defaults.runtime.comm_progress;
    s.config.trace = defaults.trace;  // the launcher picks the trace file and the stream
    s.config.connect = defaults.connect;
    s.config.global_batch = 0;  // already resolved into grad_accum
    if (preset_config(s.config.preset).preset != s.config.preset) s.config.preset.clear();  // unknown here
    return s;
}

LaunchSettings LaunchSettings::rerun(const nlohmann::json& recorded) const {
    LaunchSettings s = from_config(recorded);
    s.hosts = hosts;
    s.config.threads = config.threads;
    s.config.device = config.device;
    s.config.runtime.comm_progress = config.runtime.comm_progress;
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
    c.parallel.check_world(c.parallel.world());
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

std::string settings_prediction(const LaunchSettings& settings) {
    const predict::Prediction p = predict::predict(predict::PredictInput::from_config(settings.resolve().to_json()));
    const ParallelLayout& par = settings.config.parallel;
    std::string s = fmt::format("predicted per rank: {} (peak), {:.1f} MFLOP/token", format_bytes(p.memory_total()),
                                p.flops_per_token / 1e6);
    s += fmt::format(
        "\nactivations per layer {} (textbook {}); {} micro-batch(es) in flight on the "
        "first stage",
        format_bytes(p.activations_per_layer), format_bytes(p.activations_per_layer_formula),
        p.micro_batches_in_flight);
    if (par.tp > 1)
        s += fmt::format("\n{} parameters per rank; tp sends {} per step (critical path)", p.params_on_rank,
                         format_bytes(p.comm_bytes[size_t(prof::GroupKind::tp)]));
    if (par.cp > 1)
        s += fmt::format("\ncp {} sends {} per step", par.cp_comm == CpComm::allgather ? "all-gather" : "ring",
                         format_bytes(p.comm_bytes[size_t(prof::GroupKind::cp)]));
    if (p.active_params != p.params)
        s += fmt::format("\n{:.2f}M parameters, {:.2f}M active per token (FLOPs count these)", double(p.params) / 1e6,
                         double(p.active_params) / 1e6);
    if (par.ep > 1)
        s += fmt::format("\n{:.2f}M of them here; ep all-to-alls send {} per step (uniform routing)",
                         double(p.params_on_rank) / 1e6, format_bytes(p.comm_bytes[size_t(prof::GroupKind::ep)]));
    return s;
}

bool LaunchSettings::operator==(const LaunchSettings& o) const {
    return hosts == o.hosts && config.to_json() == o.config.to_json();
}

}  // namespace us::gui
