// What the launch panel edits: the run's TrainConfig itself (the preset it starts from is `config.preset`) and where
// its ranks run. The trainer's own flag table turns it into ultrascope-train arguments and back (engine/train/cli.h:
// train_args_of, parse_train_args), so the panel has no flag mapping of its own: whatever the trainer accepts, the
// panel keeps, shows where it has a field, and passes on.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/train/config.h"

namespace us::gui {

// Where the ranks run: the launcher, an Open MPI hostfile, and the address they stream back to.
struct HostSettings {
    std::string launcher = "mpirun", hostfile, stream_listen = "127.0.0.1";
    bool operator==(const HostSettings&) const = default;
};

struct LaunchSettings {
    TrainConfig config;  // the run; config.preset names the preset its arguments start from
    HostSettings hosts;

    int ranks() const { return config.parallel.world(); }  // ep shares the dp ranks
    // Settings from ultrascope-train flags, read by the trainer's parser (UserError on a malformed flag).
    static LaunchSettings from_args(const std::vector<std::string>& args);
    // Settings that reproduce a recorded run (its metadata's "config", as --print-config writes it), less where it
    // ran (threads, device, progress mode are the recording machine's).
    static LaunchSettings from_config(const nlohmann::json& config);
    // Switches to another preset, keeping every setting edited away from the old preset's value.
    void set_preset(const std::string& name);
    // "--preset NAME" and the flags that turn that preset into `config`.
    std::vector<std::string> train_args() const;
    // The arguments as the trainer resolves them (its parser, validation and layout check); UserError with the
    // reason when they cannot be launched.
    TrainConfig resolve() const;
    // The reason the settings cannot be launched, or "" when they can.
    std::string problem() const;
    bool operator==(const LaunchSettings& o) const;  // the same run on the same hosts
};

// A preset's configuration as the trainer's parser builds it for "--preset NAME" (the defaults when NAME is empty
// or unknown here).
TrainConfig preset_config(const std::string& name);

}  // namespace us::gui
