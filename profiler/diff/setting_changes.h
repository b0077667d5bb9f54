// The settings two engine runs differ in (docs/diff.md): what the user changed between A and B, said before the
// causes it had, and the check that a run given as a repeat of A (`ultrascope diff --repeat`) is A's settings again.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace us::prof {

struct SettingChange {
    std::string key;  // the setting's JSON key ("grad_accum")
    nlohmann::json a, b;
};

// Each run's settings (a trace's metadata: TrainConfig's JSON) read through the settings table, so that a key one
// run's version did not write is its default, then compared key by key in the table's order. "data" (the file the
// tokens came from, a path that differs between machines and temporary folders) is left out. UserError naming
// `a_what` or `b_what` for a value of the wrong type.
std::vector<SettingChange> setting_changes(const nlohmann::json& a, const nlohmann::json& b, const std::string& a_what,
                                           const std::string& b_what);

// Whether a run's settings are known: an engine run's JSON object; an imported run has {} (or null), not the defaults.
inline bool settings_known(const nlohmann::json& settings) { return settings.is_object() && !settings.empty(); }

// "pp 2 -> 4, grad_accum 1 -> 8"; "none" when empty.
std::string describe_changes(const std::vector<SettingChange>& changes);

}  // namespace us::prof
