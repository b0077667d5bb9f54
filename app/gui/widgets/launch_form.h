// The launch settings as a form (launch_form.cpp): the preset and the model, the parallel layout, experts, the hosts
// the ranks run on, checkpoints and the run's options, each field's tooltip from the settings table
// (common/settings/settings_explained.h). What does not apply is greyed out, and not passed either
// (LaunchSettings::effective). The run panel draws it for the run to launch.
#pragma once

#include "app/gui/model/launch_settings.h"
#include "app/gui/state/view_states.h"

namespace us::gui {

void draw_launch_form(LaunchSettings& settings, LaunchPanelState& panel);

}  // namespace us::gui
