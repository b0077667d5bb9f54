#include "common/settings/cli.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/core/check.h"
#include "common/settings/settings_schema.h"

namespace us {

namespace {

// The flags are the settings table's (settings_schema.cpp). Parsing writes each flag into a temporary of its kind;
// after parsing, the flags that were given are applied on top of the preset and config file, in table order, through
// the same setter the JSON uses.
struct FlagBinder {
    CLI::App& app;
    std::vector<std::pair<CLI::Option*, std::function<void(TrainConfig&)>>> appliers;

    template <typename T>
    void option(const Setting& s) {
        auto value = std::make_shared<T>();
        CLI::Option* opt = app.add_option(std::string(s.flag), *value, std::string(s.help));
        appliers.emplace_back(
            opt, [value, &s](TrainConfig& c) { set_setting(c, s, nlohmann::json(*value), std::string(s.flag)); });
    }
};

void declare_flags(FlagBinder& f) {
    for (const Setting& s : settings_schema()) {
        switch (s.kind) {
            case SettingKind::integer:
                f.option<int>(s);
                break;
            case SettingKind::unsigned_integer:
                f.option<uint64_t>(s);
                break;
            case SettingKind::number:
                f.option<double>(s);
                break;
            case SettingKind::text:
            case SettingKind::choice:
                f.option<std::string>(s);
                break;
            case SettingKind::boolean: {
                const std::string help(s.help);
                CLI::Option* opt = f.app.add_flag(std::string(s.flag), help);
                f.appliers.emplace_back(opt, [&s](TrainConfig& c) { s.set(c, nlohmann::json(s.switch_value)); });
                break;
            }
        }
    }
}

}  // namespace

std::function<TrainCommandLine()> add_train_flags(CLI::App& app) {
    auto binder = std::make_shared<FlagBinder>(FlagBinder{app, {}});
    auto preset = std::make_shared<std::string>();
    auto config_file = std::make_shared<std::string>();
    auto print_config = std::make_shared<bool>(false);
    FlagBinder& f = *binder;
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated flag: last wins

    app.add_option("--preset", *preset, "Model and run preset from assets/presets (tiny, small, medium, ...)");
    app.add_option("--config", *config_file, "JSON file of settings (keys are flag names, '_' for '-')");
    declare_flags(f);
    // tools
    app.add_flag("--print-config", *print_config, "Print the resolved settings as JSON and exit");

    return [binder, preset, config_file, print_config]() {
        TrainCommandLine out;
        TrainConfig& c = out.config;
        nlohmann::json file_json;
        if (!config_file->empty()) {
            std::error_code ec;
            US_CHECK_INPUT(!std::filesystem::is_directory(*config_file, ec),
                           "cannot read --config file '{}': it is a folder (give a JSON file of settings)",
                           *config_file);
            std::ifstream in(*config_file);
            US_CHECK_INPUT(in.good(), "cannot read --config file '{}'", *config_file);
            try {
                file_json = nlohmann::json::parse(in);
            } catch (const nlohmann::json::exception& e) {
                fail_user("--config file '{}' is not valid JSON: {}", *config_file, e.what());
            }
            US_CHECK_INPUT(file_json.is_object(), "--config file '{}' must hold a JSON object", *config_file);
        }
        std::string preset_name = *preset;
        if (preset_name.empty() && file_json.contains("preset")) {
            US_CHECK_INPUT(file_json["preset"].is_string(), "{}: 'preset' must be a string", *config_file);
            preset_name = file_json["preset"].get<std::string>();
        }
        if (!preset_name.empty()) apply_preset(c, preset_name);
        if (!file_json.is_null()) apply_config_json(c, file_json, "--config file '" + *config_file + "'");
        for (auto& [opt, apply] : binder->appliers)
            if (opt->count() > 0) apply(c);
        // --global-batch sets grad_accum; one given beside it that the division does not give is a conflict, not a
        // setting to overwrite in silence.
        const int accum_asked = c.grad_accum;
        const CLI::Option* accum_flag = binder->app.get_option_no_throw("--grad-accum");
        c.resolve_global_batch();
        US_CHECK_INPUT(c.global_batch == 0 || !accum_flag || accum_flag->count() == 0 || c.grad_accum == accum_asked,
                       "--global-batch {} over dp {} x batch {} makes {} micro-batches a step, not the --grad-accum {} "
                       "given: give one of the two",
                       c.global_batch, c.parallel.dp, c.batch, c.grad_accum, accum_asked);
        out.print_config = *print_config;
        return out;
    };
}

std::vector<std::string> train_args_of(const TrainConfig& config, const TrainConfig& base) {
    std::vector<std::string> args;
    for (const Setting& s : settings_schema()) {
        const nlohmann::json v = s.get(config);
        if (v == s.get(base)) continue;
        US_CHECK_INPUT(s.kind != SettingKind::boolean || v.get<bool>() == s.switch_value,
                       "{} cannot undo a setting of the preset", s.flag);
        const auto words = flag_words(s, v);
        args.insert(args.end(), words.begin(), words.end());
    }
    return args;
}

std::vector<std::string> train_flag_names() {
    std::vector<std::string> names;
    for (const Setting& s : settings_schema()) names.emplace_back(s.flag);
    return names;
}

ParsedTrainArgs parse_train_args(int argc, const char* const* argv) {
    CLI::App app{"ultrascope-train: train the bundled GPT (one process per rank; start several with mpirun)"};
    auto build = add_train_flags(app);
    ParsedTrainArgs result;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        result.help_requested = true;
        result.help_text = app.help();
        return result;
    } catch (const CLI::ParseError& e) {
        fail_user("{} (see ultrascope-train --help: the training flags)", e.what());
    }
    result.cmd = build();
    return result;
}

}  // namespace us
