// What the launch panel edits: the run's TrainConfig itself (the preset it starts from is `config.preset`) and where
// its ranks run. The trainer's own flag table turns it into ultrascope-train arguments and back (common/settings/cli.h:
// train_args_of, parse_train_args), so the panel has no flag mapping of its own: whatever the trainer accepts, the
// panel keeps, shows where it has a field, and passes on.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/launch/launch_options.h"
#include "common/settings/config.h"

namespace us::gui {

// Which settings do anything in a configuration. The panel greys out the others, and what it greys out it does not
// pass: train_args() and resolve() read effective(), where each of them is back at the preset's value.
struct Applicable {
    bool schedule = true;    // the pipeline schedule: pp > 1
    bool chunks = true;      // chunks per rank: the interleaved schedule
    bool sp = true;          // sequence parallelism: tp > 1
    bool cp_balance = true;  // how cp cuts the sequence and moves keys and values: cp > 1
    bool experts = true;     // top-K, every, capacity, balance loss, ep: a mixture of experts
    bool save_every = true;  // a checkpoint to save
    bool operator==(const Applicable&) const = default;
};
Applicable applicable(const TrainConfig& c);

struct LaunchSettings {
    TrainConfig config;      // the run; config.preset names the preset its arguments start from
    app::HostOptions hosts;  // where its ranks run (the launch flags' owner, app/launch/launch_options.h)

    int ranks() const { return config.parallel.world(); }  // ep shares the dp ranks
    // Settings from ultrascope-train flags, read by the trainer's parser (UserError on a malformed flag).
    static LaunchSettings from_args(const std::vector<std::string>& args);
    // Settings that reproduce a recorded run (its metadata's "config", as --print-config writes it), less where it
    // ran (threads, device, progress mode are the recording machine's).
    static LaunchSettings from_config(const nlohmann::json& config);
    // A recorded run's settings (from_config) where these settings run: their hosts, device, threads and progress
    // mode. Opening a trace puts its run into the panel this way; the Compare room runs A's settings again with it.
    LaunchSettings rerun(const nlohmann::json& config) const;
    // Switches to another preset, keeping every setting edited away from the old preset's value.
    void set_preset(const std::string& name);
    // `config` with every setting that does not apply (applicable()) back at the preset's value, and the schedule
    // at pp 1 the one that runs a micro-batch at a time (1f1b; AFAB at pp 1 would run every forward first and hold
    // every micro-batch's activations, which a greyed-out schedule must not do behind the panel's back).
    TrainConfig effective() const;
    // "--preset NAME" and the flags that turn that preset into effective().
    std::vector<std::string> train_args() const;
    // The arguments as the trainer resolves them (its parser, validation and layout check); UserError with the
    // reason when they cannot be launched.
    TrainConfig resolve() const;
    // The reason the settings cannot be launched, or "" when they can.
    std::string problem() const;
    bool operator==(const LaunchSettings& o) const;  // the same run on the same hosts
};

// What the formulas predict for settings that resolve (problem() is empty), in the launch panel's words: memory and
// FLOPs per rank, activations, and the communication of tp, cp and ep where the panel has them on.
std::string settings_prediction(const LaunchSettings& s);

// A preset's configuration as the trainer's parser builds it for "--preset NAME" (the defaults when NAME is empty
// or unknown here).
TrainConfig preset_config(const std::string& name);

}  // namespace us::gui
