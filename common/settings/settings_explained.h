// What a setting does, told at more length than its help line: the launch panel's tooltips (a teacher's words for
// someone meeting data, tensor or context parallelism for the first time). Keyed by the settings table's JSON key
// (settings_schema.h), so a setting's flag, help line and explanation live beside each other and nowhere else.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace us {

// The explanation of one setting; "" when its help line says it all.
std::string_view setting_explanation(std::string_view key);
// The keys that have one (the tests check each is a setting of the table).
std::vector<std::string_view> explained_settings();
// A tooltip: the help line and flag from the table, then the explanation.
std::string setting_tooltip(std::string_view key);

}  // namespace us
