#include "common/settings/config.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/core/check.h"
#include "common/settings/settings_rules.h"
#include "common/settings/settings_schema.h"

namespace us {

namespace fs = std::filesystem;

void TrainConfig::validate() const {
    model.validate();
    US_CHECK_INPUT(steps >= 0, "--steps must not be negative (got {})", steps);
    US_CHECK_INPUT(save_every >= 0, "--save-every must not be negative (got {})", save_every);
    US_CHECK_INPUT(save_every == 0 || !save.empty(), "--save-every {} needs --save FILE: the checkpoint to write",
                   save_every);
    US_CHECK_INPUT(adamw.lr > 0 && std::isfinite(adamw.lr), "--lr must be a positive number (got {})", adamw.lr);
    US_CHECK_INPUT(min_lr_ratio >= 0 && min_lr_ratio <= 1,
                   "--min-lr-ratio must be from 0 to 1 (got {}): the cosine decay's floor as a fraction of --lr",
                   min_lr_ratio);
    US_CHECK_INPUT(warmup >= 0, "--warmup must not be negative (got {})", warmup);
    US_CHECK_INPUT(grad_clip >= 0, "--grad-clip must not be negative (got {}); 0 disables clipping", grad_clip);
    US_CHECK_INPUT(adamw.weight_decay >= 0, "--weight-decay must not be negative (got {})", adamw.weight_decay);
    US_CHECK_INPUT(threads >= 0 && threads <= kMaxThreads,
                   "--threads must be from 0 (automatic) to {} (got {}): compute threads of one rank", kMaxThreads,
                   threads);
    US_CHECK_INPUT(slow_factor >= 1.0 && slow_factor <= 100.0,
                   "--slow-factor must be between 1 and 100 (got {}): how many times as long the slow rank computes",
                   slow_factor);
    US_CHECK_INPUT(fault_step <= 0 || (fault_rank >= 0 && fault_rank < parallel.world()),
                   "--fault-kill-rank must be a rank, 0 to {} (got {})", parallel.world() - 1, fault_rank);
    US_CHECK_INPUT(slow_rank >= -1 && slow_rank < parallel.world(),
                   "--slow-rank must be a rank, 0 to {} (got {}; -1: none)", parallel.world() - 1, slow_rank);
    US_CHECK_INPUT(slow_kind == "work" || slow_kind == "load",
                   "unknown --slow-kind '{}': expected work (the slow rank repeats its compute) or load (busy threads "
                   "share its CPU)",
                   slow_kind);
    US_CHECK_INPUT(slow_rank < 0 || slow_kind != "load" ||
                       (slow_factor >= 2 && slow_factor <= 16 && slow_factor == std::round(slow_factor)),
                   "--slow-kind load needs a whole --slow-factor from 2 to 16 (got {}): the slow rank's thread shares "
                   "its CPU with factor - 1 busy threads",
                   slow_factor);
    US_CHECK_INPUT(fr_buffer_size >= 0 && fr_buffer_size <= 1000000,
                   "--fr-buffer-size must be between 0 (off) and 1000000 entries (got {})", fr_buffer_size);
    US_CHECK_INPUT(hang_timeout >= 0, "--hang-timeout must not be negative (got {}); 0: no watchdog", hang_timeout);
    check_injected_hang();
    check_setting_rules(*this);
}

// The injected hang's flags: a rank of the run, a step of the run, and a kind that can hang this layout.
void TrainConfig::check_injected_hang() const {
    US_CHECK_INPUT(hang_rank >= -1, "--hang-rank must be a rank (got {}; -1: none)", hang_rank);
    if (hang_rank < 0) return;
    const ParallelLayout& p = parallel;
    US_CHECK_INPUT(hang_rank < p.world(), "--hang-rank {}: the layout has {} rank(s), 0 to {}", hang_rank, p.world(),
                   p.world() - 1);
    US_CHECK_INPUT(hang_at_step >= 1 && hang_at_step <= steps,
                   "--hang-at-step {}: the run's steps are 1 to {} (--steps)", hang_at_step, steps);
    US_CHECK_INPUT(hang_kind == "skip" || hang_kind == "mismatch" || hang_kind == "p2p",
                   "--hang-kind '{}': expected skip, mismatch or p2p", hang_kind);
    US_CHECK_INPUT(p.world() > 1, "--hang-rank {} on one rank: a hang needs other ranks to wait (use --dp 2 or more)",
                   hang_rank);
    US_CHECK_INPUT(hang_kind != "p2p" || p.pp >= 2,
                   "--hang-kind p2p needs a pipeline (--pp 2 or more): it turns a stage's send into a receive");
    US_CHECK_INPUT(hang_kind != "mismatch" || (p.dp * p.cp >= 2 && p.zero == 0),
                   "--hang-kind mismatch needs data parallelism whose gradients are all-reduced (--dp 2 or more and "
                   "--zero 0): the rank all-reduces a gradient bucket of another size");
}

void TrainConfig::resolve_global_batch() {
    if (global_batch == 0) return;
    const int per_step = parallel.dp * batch;
    US_CHECK_INPUT(global_batch > 0, "--global-batch must be positive (got {})", global_batch);
    US_CHECK_INPUT(per_step > 0 && global_batch % per_step == 0,
                   "--global-batch {} is not divisible by dp {} x batch {} = {}: choose a multiple of {}", global_batch,
                   parallel.dp, batch, per_step, per_step);
    grad_accum = global_batch / per_step;
}

// Both directions come from the settings table (settings_schema.cpp): every setting it marks as written is
// written here and read back by apply_config_json.
nlohmann::json TrainConfig::to_json() const {
    nlohmann::json j = {{"preset", preset}};
    for (const Setting& s : settings_schema())
        if (s.json == InJson::written) j[std::string(s.key)] = s.get(*this);
    return j;
}

void apply_config_json(TrainConfig& cfg, const nlohmann::json& j, const std::string& source) {
    US_CHECK_INPUT(j.is_object(), "{}: expected a JSON object of settings", source);
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& k = it.key();
        if (k == "description" || k == "preset") continue;  // presets describe themselves; preset handled first
        const Setting* s = find_setting(k);
        if (s == nullptr || s->json == InJson::no)
            fail_user("{}: unknown setting '{}' (settings use the flag names with '_' for '-', e.g. grad_accum)",
                      source, k);
        set_setting(cfg, *s, it.value(), source);
    }
}

std::string assets_dir() {
    if (const char* env = std::getenv("ULTRASCOPE_ASSETS"); env && *env) return env;
    return std::string(US_SOURCE_DIR) + "/assets";
}

std::string default_corpus_path() { return assets_dir() + "/corpus/default.txt"; }

std::vector<std::string> list_presets() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(assets_dir() + "/presets", ec))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

void apply_preset(TrainConfig& cfg, const std::string& name) {
    const std::string path = assets_dir() + "/presets/" + name + ".json";
    std::ifstream in(path);
    if (!in.good()) {
        std::string known;
        for (const auto& n : list_presets()) known += (known.empty() ? "" : ", ") + n;
        fail_user("unknown preset '{}': known presets are {}", name, known.empty() ? "(none found)" : known);
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        fail_user("preset file '{}' is not valid JSON: {}", path, e.what());
    }
    apply_config_json(cfg, j, "preset '" + name + "'");
    cfg.preset = name;
}

}  // namespace us
