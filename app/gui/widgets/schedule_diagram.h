// The pipeline schedule as a diagram (schedule_diagram.cpp): one row per stage, F/B/W boxes, each stage's bubble.
// The timeline view shows the run's, predicted above measured; the planner view a layout's, predicted.
#pragma once

#include "app/gui/model/pipeline_diagram_model.h"
#include "app/gui/state/app_state.h"

namespace us::gui {

// The run's schedule, predicted above measured (step: see DerivedViews::measured_diagram); false without a pipeline.
bool draw_pipeline_schedule(AppState& app, int step);
// One schedule diagram, `width` pixels wide.
void draw_pipeline_diagram(const PipelineDiagram& d, int chunks, float width);

}  // namespace us::gui
