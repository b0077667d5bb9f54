// The pipeline schedule as a small diagram, one row per stage: the theory (the run's schedule list from
// engine/parallel/pipeline_schedule, simulated on an idealised machine with forward 1, backward 2) and one measured
// step of the first data-parallel replica (its F/B/W phase spans), both normalised to the width of the pipeline's
// window so the shapes compare at a glance.
#pragma once

#include <string>
#include <vector>

#include "common/schedule/pipeline_schedule.h"
#include "profiler/analysis/report.h"
#include "profiler/trace/trace_store.h"

namespace us::gui {

struct DiagramBox {
    int stage = 0;
    PipeOp op = PipeOp::forward;
    int micro_batch = 0, chunk = 0;
    double start = 0, end = 0;  // fractions of the window, 0..1
};

struct PipelineDiagram {
    int stages = 0;
    std::vector<DiagramBox> boxes;
    double window_ns = 0;            // measured: the window's length; theory: 0
    std::vector<double> bubble;      // per stage: idle inside the window over its busy time
    std::string caption;             // what it shows, with "predicted" or "measured"
    std::string kind = "predicted";  // of its times: "measured", or "predicted" (theory, or a planner's trace)
};

// From the run's configuration (report.predict_input); empty (stages == 0) when the run has no pipeline or the
// schedule cannot run the shape.
PipelineDiagram theory_diagram(const predict::PredictInput& run);

// The given step of the ranks with data-parallel coordinate 0; empty when the step is not (yet) in the trace.
PipelineDiagram measured_diagram(const prof::TraceStore& store, const prof::Report& report, int step);

}  // namespace us::gui
