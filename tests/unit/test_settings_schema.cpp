// The settings table (common/settings/settings_schema.h) is the one definition of every training setting; these
// tests walk the table itself, so a setting added to it is covered without a new case: every key written is read
// back, every flag round-trips flags -> config -> JSON -> config -> flags, a layout's settings survive
// config -> predict::Layout -> config and its flags, and each cross-setting rule refuses the same configs in the engine
// (TrainConfig::validate), the planner (predict::check_layout) and the launch panel (LaunchSettings::problem).
#include <algorithm>
#include <functional>
#include <set>

#include <catch2/catch.hpp>

#include "app/gui/model/launch_settings.h"
#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/layout.h"
#include "profiler/predict/model_desc.h"
#include "common/settings/cli.h"
#include "common/settings/settings_explained.h"
#include "common/settings/settings_rules.h"
#include "common/settings/settings_schema.h"
#include "test_util.h"

using namespace us;

namespace {

TrainConfig parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : args) argv.push_back(a.c_str());
    return parse_train_args(int(argv.size()), argv.data()).cmd.config;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    return "(no error)";
}

// A value of the setting other than its default, of the setting's own kind.
nlohmann::json other_value(const Setting& s) {
    const nlohmann::json d = s.get(TrainConfig{});
    switch (s.kind) {
        case SettingKind::integer:
            return d.get<int64_t>() + 3;
        case SettingKind::unsigned_integer:
            return d.get<uint64_t>() + 1234567890123ull;
        case SettingKind::number:
            return d.get<double>() * 2 + 0.125;
        case SettingKind::boolean:
            return !d.get<bool>();
        case SettingKind::text:
        case SettingKind::choice:
            for (std::string_view c : s.choices)
                if (c != d.get<std::string>()) return std::string(c);
            return d.get<std::string>() + "x";
    }
    return nullptr;
}

}  // namespace

TEST_CASE("schema: every key is unique, every written key is read back", "[cpu][schema]") {
    std::set<std::string_view> keys, flags;
    for (const Setting& s : settings_schema()) {
        INFO(s.key);
        CHECK(keys.insert(s.key).second);
        CHECK(flags.insert(s.flag).second);
        CHECK(!s.help.empty());
        if (s.kind == SettingKind::choice) CHECK(!s.choices.empty());
    }
    // to_json writes the table's written settings and nothing else (the preset's name besides)
    const nlohmann::json defaults = TrainConfig{}.to_json();
    for (auto it = defaults.begin(); it != defaults.end(); ++it) {
        INFO(it.key());
        const Setting* s = find_setting(it.key());
        CHECK((it.key() == "preset" || (s != nullptr && s->json == InJson::written)));
    }
    for (const Setting& s : settings_schema()) {
        INFO(s.key);
        if (s.json == InJson::no) {
            CHECK(!defaults.contains(std::string(s.key)));
            CHECK(error_of([&] {
                      TrainConfig c;
                      apply_config_json(c, {{std::string(s.key), s.get(c)}}, "t");
                  }).find("unknown setting") != std::string::npos);
            continue;
        }
        const nlohmann::json v = other_value(s);
        TrainConfig c;
        apply_config_json(c, {{std::string(s.key), v}}, "test");
        CHECK(s.get(c) == v);
        if (s.json == InJson::written) {
            CHECK(c.to_json().at(std::string(s.key)) == v);
            CHECK(settings_from_json(c.to_json(), "test").to_json() == c.to_json());
        }
        // a value of the wrong type is refused, naming the key and the source
        const nlohmann::json wrong =
            s.kind == SettingKind::text || s.kind == SettingKind::choice ? nlohmann::json(1) : nlohmann::json("1");
        const std::string msg = error_of([&] {
            TrainConfig d;
            apply_config_json(d, {{std::string(s.key), wrong}}, "cfg.json");
        });
        CHECK(msg.find("cfg.json") != std::string::npos);
        CHECK(msg.find(std::string(s.key)) != std::string::npos);
    }
}

TEST_CASE("schema: every flag round-trips flags -> config -> JSON -> config -> flags", "[cpu][schema]") {
    for (const Setting& s : settings_schema()) {
        if (s.key == "global_batch") continue;  // resolved into grad_accum: its own case below
        INFO(s.flag);
        const nlohmann::json v = other_value(s);
        const std::vector<std::string> words = flag_words(s, v);
        REQUIRE(!words.empty());
        const TrainConfig first = parse(words);
        CHECK(s.get(first) == v);
        CHECK(train_args_of(first) == words);  // only this flag differs from the defaults, written back as given
        if (s.json == InJson::written) {
            TrainConfig second;
            apply_config_json(second, first.to_json(), "test");
            CHECK(train_args_of(second) == words);
        }
    }
    const TrainConfig global = parse({"--dp", "2", "--batch", "3", "--global-batch", "24"});
    CHECK(global.grad_accum == 4);
    TrainConfig from_json;
    apply_config_json(from_json, {{"dp", 2}, {"batch", 3}, {"global_batch", 24}}, "test");
    from_json.resolve_global_batch();
    CHECK(from_json.to_json() == global.to_json());
}

TEST_CASE("schema: a layout's settings survive config -> Layout -> config and its flags", "[cpu][schema][planner]") {
    // Each layout setting alone at another value comes back through the layout.
    for (std::string_view key : predict::layout_setting_keys()) {
        const Setting& s = setting(key);
        INFO(key);
        nlohmann::json v = other_value(s);
        if (key == "recompute") v = "selective";
        TrainConfig c;
        s.set(c, v);
        TrainConfig back;
        predict::apply_layout(predict::layout_from_config(c), back);
        CHECK(s.get(back) == v);
    }
    // Every setting a layout holds is in its flags (none dropped), and the flags read back the same layout.
    const TrainConfig run = parse({"--dp",
                                   "4",
                                   "--tp",
                                   "2",
                                   "--sp",
                                   "--pp",
                                   "2",
                                   "--cp",
                                   "2",
                                   "--ep",
                                   "2",
                                   "--moe-experts",
                                   "4",
                                   "--zero",
                                   "1",
                                   "--pp-schedule",
                                   "interleaved",
                                   "--pp-chunks",
                                   "2",
                                   "--batch",
                                   "2",
                                   "--grad-accum",
                                   "4",
                                   "--recompute",
                                   "selective",
                                   "--precision",
                                   "bf16",
                                   "--fp32-grad-accum",
                                   "--attention",
                                   "flash",
                                   "--no-overlap",
                                   "--bucket-mb",
                                   "0.5",
                                   "--cp-balance",
                                   "contiguous",
                                   "--cp-comm",
                                   "allgather"});
    const predict::Layout l = predict::layout_from_config(run);
    const std::vector<std::string> words = l.flag_words();
    for (std::string_view key : predict::layout_setting_keys()) {
        INFO(key);
        CHECK(std::find(words.begin(), words.end(), std::string(setting(key).flag)) != words.end());
    }
    const TrainConfig again = parse(words);
    for (std::string_view key : predict::layout_setting_keys()) {
        INFO(key);
        CHECK(setting(key).get(again) == setting(key).get(run));
    }
    CHECK(predict::layout_from_config(again).flags() == l.flags());
}

TEST_CASE("schema: a setting that does nothing is greyed out by the panel and not passed", "[cpu][schema][gui-model]") {
    // The defaults have no pipeline, tp, cp, experts or checkpoint: every setting with an `applies` does nothing.
    int conditional = 0;
    for (const Setting& s : settings_schema()) {
        if (!s.applies) continue;
        ++conditional;
        INFO(s.key);
        gui::LaunchSettings panel;
        s.set(panel.config, other_value(s));
        CHECK(!setting_applies(s, panel.config));
        const std::vector<std::string> args = panel.train_args();
        CHECK(std::find(args.begin(), args.end(), std::string(s.flag)) == args.end());
        CHECK(s.get(panel.effective()) == s.get(TrainConfig{}));
    }
    CHECK(conditional >= 9);  // schedule, chunks, sp, cp balance, ep, four expert settings, save-every, nccl
    // and where they apply, they are passed
    gui::LaunchSettings on = gui::LaunchSettings::from_args({"--pp",
                                                             "2",
                                                             "--pp-schedule",
                                                             "interleaved",
                                                             "--pp-chunks",
                                                             "2",
                                                             "--tp",
                                                             "2",
                                                             "--sp",
                                                             "--cp",
                                                             "2",
                                                             "--cp-balance",
                                                             "contiguous",
                                                             "--cp-comm",
                                                             "allgather",
                                                             "--moe-experts",
                                                             "4",
                                                             "--ep",
                                                             "2",
                                                             "--dp",
                                                             "2",
                                                             "--moe-topk",
                                                             "1",
                                                             "--save",
                                                             "x.safetensors",
                                                             "--save-every",
                                                             "5",
                                                             "--device",
                                                             "cuda",
                                                             "--slow-rank",
                                                             "1",
                                                             "--hang-rank",
                                                             "1"});
    const std::vector<std::string> args = on.train_args();
    for (const Setting& s : settings_schema()) {
        if (!s.applies) continue;
        INFO(s.key);
        CHECK(setting_applies(s, on.config));
        if (s.get(on.config) != s.get(TrainConfig{}))
            CHECK(std::find(args.begin(), args.end(), std::string(s.flag)) != args.end());
    }
}

TEST_CASE("schema: each rule refuses the same configs in the engine, the planner and the launch panel",
          "[cpu][schema][planner]") {
    const predict::ClusterDesc cluster = predict::load_cluster("h100-sxm");
    // A small engine model: 4 layers, 4 heads, seq 64 (and 4 experts where a case adds --moe-experts).
    const std::vector<std::string> base = {"--layers", "4",  "--hidden", "64",  "--heads",      "4",
                                           "--seq",    "64", "--vocab",  "256", "--grad-accum", "4"};
    struct Case {
        std::vector<std::string> flags;
        std::string refused;  // a piece of the message; "" for a config every place accepts
        // The panel greys out a setting that does nothing (sp at tp 1, ep without experts) and does not pass it.
        bool panel_greys_out = false;
    };
    const std::vector<Case> cases = {
        {{"--dp", "2"}, ""},
        {{"--pp", "2", "--pp-schedule", "zb1", "--precision", "bf16"}, ""},
        {{"--pp", "2", "--pp-schedule", "zb1", "--moe-experts", "4"}, "zb1 with mixture-of-experts"},
        {{"--pp", "2", "--pp-schedule", "zb1", "--precision", "bf16", "--fp32-grad-accum"},
         "zb1 with --fp32-grad-accum"},
        {{"--pp", "2", "--pp-schedule", "zb1", "--recompute", "full"}, "--recompute full"},
        {{"--fp32-grad-accum"}, "--fp32-grad-accum needs --precision bf16"},
        {{"--sp"}, "--sp (sequence parallelism) works inside a tensor-parallel group", true},
        {{"--tp", "3"}, "--heads 4 cannot be split over --tp 3"},
        {{"--pp", "2", "--zero", "2"}, "pipelines compose with ZeRO-0 and ZeRO-1 only"},
        {{"--dp", "2", "--ep", "2"}, "--ep 2 needs experts to spread", true},
        {{"--dp", "3", "--ep", "3", "--moe-experts", "6"}, ""},
        {{"--dp", "2", "--ep", "2", "--moe-experts", "3"}, "cannot be split over --ep 2"},
        {{"--pp", "3"}, "--layers 4 cannot be split evenly"},
        {{"--cp", "3"}, "--seq 64 cannot be split over --cp 3"},
        {{"--cp", "2", "--cp-comm", "allgather"}, ""},
        {{"--cp", "2", "--cp-comm", "allgather", "--batch", "300000"}, "--cp-comm allgather would gather"},
        {{"--pp", "2", "--pp-schedule", "interleaved", "--pp-chunks", "2", "--grad-accum", "3"}, "multiple of --pp"},
    };
    for (const Case& k : cases) {
        std::vector<std::string> args = base;
        args.insert(args.end(), k.flags.begin(), k.flags.end());
        std::string joined;
        for (const auto& a : k.flags) joined += a + " ";
        INFO(joined);
        const TrainConfig cfg = parse(args);
        const std::string engine = error_of([&] { cfg.validate(); });
        const predict::ModelDesc model =
            predict::engine_model("test", cfg.model.vocab, cfg.model.hidden, cfg.model.layers, cfg.model.heads,
                                  cfg.model.seq, cfg.model.moe_experts, cfg.model.moe_topk, cfg.model.moe_every, 0);
        const predict::Layout layout = predict::layout_from_config(cfg);
        const std::string planner = error_of([&] { predict::check_layout(model, cluster, layout, layout.world()); });
        const std::string panel = gui::LaunchSettings::from_args(args).problem();
        if (k.refused.empty()) {
            CHECK(engine == "(no error)");
            CHECK(planner == "(no error)");
            CHECK(panel.empty());
        } else {
            CHECK(engine.find(k.refused) != std::string::npos);
            CHECK(planner == engine);
            CHECK(panel == (k.panel_greys_out ? std::string() : engine));
            CHECK(setting_rules_problem(cfg) == engine);
        }
    }
}

TEST_CASE(
    "settings schema: every explanation belongs to a setting, and a tooltip is its help line, flag and explanation",
    "[schema]") {
    REQUIRE_FALSE(explained_settings().empty());
    for (const std::string_view key : explained_settings()) {
        INFO(key);
        const Setting* s = find_setting(key);
        REQUIRE(s != nullptr);
        const std::string tip = setting_tooltip(key);
        CHECK(tip.find(s->help) == 0);
        CHECK(tip.find(std::string(s->flag)) != std::string::npos);
        CHECK(tip.find(setting_explanation(key)) != std::string::npos);
    }
    CHECK(setting_explanation("seed").empty());  // its help line says it all
    CHECK(setting_tooltip("seed") == "Seed of weights and data order (--seed)");
}
