// The command line of ultrascope-train: one flag per entry of the settings table (settings_schema.h: its name and
// help text), and the layering of defaults, preset, config file and flags into one TrainConfig. Shared with
// `ultrascope run`, which forwards these flags.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/settings/config.h"

namespace CLI {
class App;
}

namespace us {

struct TrainCommandLine {
    TrainConfig config;
    bool print_config = false;  // --print-config: print the resolved config as JSON and exit
};

// Registers the training flags on `app`. After app.parse(), call the returned function to build the config:
// defaults, then --preset, then --config FILE, then the flags that were given. Throws UserError on bad values.
std::function<TrainCommandLine()> add_train_flags(CLI::App& app);

// The flags that turn `base` (the defaults, or a preset's config) into `config`: every flag whose field differs,
// written by the same table that parses them. parse_train_args(train_args_of(c)) gives c back; with a preset's
// config as the base, "--preset NAME" followed by them does.
std::vector<std::string> train_args_of(const TrainConfig& config, const TrainConfig& base = TrainConfig{});
// Every training flag's name, in declaration order (the round-trip test covers each).
std::vector<std::string> train_flag_names();

// Parses argv (for ultrascope-train). Throws UserError; CLI11 parse errors are turned into UserError too, with
// `--help` handled by printing the help and returning with help_requested set.
struct ParsedTrainArgs {
    TrainCommandLine cmd;
    bool help_requested = false;
    std::string help_text;
};
ParsedTrainArgs parse_train_args(int argc, const char* const* argv);

}  // namespace us
