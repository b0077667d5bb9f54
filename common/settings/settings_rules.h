// The rules that refuse a combination of training settings, written once. The engine (TrainConfig::validate), the
// planner (predict::check_layout, on the config a layout and a described model make) and the launch panel (through
// validate) all call check_setting_rules, so they refuse the same things with the same message.
#pragma once

#include <string>

#include "common/settings/config.h"

namespace us {

struct RuleContext {
    // The planner's models other than the engine's GPT may cut uneven pipeline stages (the busiest is planned for)
    // as long as every stage keeps two layers; the engine cuts equal ones.
    bool uneven_stages_ok = false;
};

// Throws UserError naming the first rule `cfg` breaks and what to do.
void check_setting_rules(const TrainConfig& cfg, const RuleContext& context = {});
// The first rule's message, or "" when every rule holds.
std::string setting_rules_problem(const TrainConfig& cfg, const RuleContext& context = {});

}  // namespace us
