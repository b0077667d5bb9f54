// Every training setting defined once: its flag, its JSON key, its help line, its kind and the TrainConfig member it
// sets (the default is that member's default). The trainer's flags (cli.cpp), a config's JSON (TrainConfig::to_json,
// apply_config_json: --print-config, config files, presets, trace metadata) and the flags a config launches with
// (train_args_of, predict::Layout::flags, the launch panel) are views of this one table.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/settings/config.h"

namespace us {

enum class SettingKind {
    integer,           // int member; JSON integer
    unsigned_integer,  // uint64_t member (the seed); JSON integer
    number,            // double member; JSON number
    boolean,           // bool member; a switch on the command line (giving it sets `switch_value`)
    text,              // std::string member; JSON string (validate() checks the ones with `choices`)
    choice,            // an enum member; JSON string, one of `choices`, parsed by its parse_* function
};

// Where a setting appears in a config's JSON.
enum class InJson {
    written,    // written by to_json and read back by apply_config_json
    read_only,  // read from config files (global_batch: resolved into grad_accum, so never written)
    no,         // a flag only: where this process writes and what it injects (save, trace, fault_kill_step ...)
};

struct Setting {
    std::string_view flag;  // "--grad-accum"
    std::string_view key;   // "grad_accum": the JSON key and the setting's name everywhere else
    std::string_view help;
    SettingKind kind = SettingKind::integer;
    InJson json = InJson::written;
    bool switch_value = true;               // boolean: what giving the flag sets (false for --no-overlap)
    std::vector<std::string_view> choices;  // text and choice: the values accepted (empty: any text)
    // When the setting does anything (the pipeline schedule with pp > 1, the experts' settings with experts, ...);
    // empty: always. Where it does not, the launch panel greys it out and does not pass it, and predict::Layout does
    // not write it.
    std::function<bool(const TrainConfig&)> applies;
    std::function<nlohmann::json(const TrainConfig&)> get;
    // Sets the member from a value of the kind's JSON type (set_setting checks the type first); UserError for a
    // choice that is not one of `choices`.
    std::function<void(TrainConfig&, const nlohmann::json&)> set;
};

// The table, in the order the flags are declared (and written back).
const std::vector<Setting>& settings_schema();
const Setting* find_setting(std::string_view key);  // by JSON key; nullptr when unknown
const Setting& setting(std::string_view key);       // by JSON key; a programming error when unknown

bool setting_applies(const Setting& s, const TrainConfig& cfg);

// Sets `s` on cfg from a JSON value; UserError "{source}: '{key}' must be ..." when the value has the wrong type.
void set_setting(TrainConfig& cfg, const Setting& s, const nlohmann::json& value, const std::string& source);

// A run's settings as far as a JSON object of them tells (a trace's metadata, written by another version perhaps):
// each key of the table is read (UserError naming `source` for a wrong type), keys it does not know are skipped,
// and a key that is missing is the table's default (TrainConfig's), knowingly. Null reads as all defaults.
TrainConfig settings_from_json(const nlohmann::json& j, const std::string& source);

// The flag's argument for a value ("0.0006", "bf16", "3"); "" for a switch.
std::string flag_argument(const Setting& s, const nlohmann::json& value);
// The command-line words that set `s` to `value`: {"--tp", "2"}, {"--sp"}; none for a switch at its off value.
std::vector<std::string> flag_words(const Setting& s, const nlohmann::json& value);
// The flags that set each of `keys` of cfg explicitly, whatever the value (switches only when on), in table order.
std::vector<std::string> flags_for_keys(const TrainConfig& cfg, const std::vector<std::string_view>& keys);

}  // namespace us
