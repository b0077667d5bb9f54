// The settings two runs differ in (setting_changes.h).
#include "profiler/diff/setting_changes.h"

#include <fmt/format.h>

#include "common/settings/settings_schema.h"

namespace us::prof {

namespace {

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

std::vector<SettingChange> setting_changes(const nlohmann::json& a, const nlohmann::json& b, const std::string& a_what,
                                           const std::string& b_what) {
    const nlohmann::json ja = settings_from_json(a, a_what).to_json(), jb = settings_from_json(b, b_what).to_json();
    std::vector<SettingChange> out;
    // the preset first (where the model's shape came from; to_json writes it outside the table), then the table
    if (ja["preset"] != jb["preset"]) out.push_back({"preset", ja["preset"], jb["preset"]});
    for (const Setting& s : settings_schema()) {
        const std::string key(s.key);
        if (key == "data" || !ja.contains(key) || !jb.contains(key)) continue;
        if (ja[key] != jb[key]) out.push_back({key, ja[key], jb[key]});
    }
    return out;
}

std::string describe_changes(const std::vector<SettingChange>& changes) {
    if (changes.empty()) return "none";
    std::string s;
    for (const SettingChange& c : changes)
        s += fmt::format("{}{} {} -> {}", s.empty() ? "" : ", ", c.key, value_text(c.a), value_text(c.b));
    return s;
}

}  // namespace us::prof
