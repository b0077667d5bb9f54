// What the report says about a run imported from PyTorch's profiler (Kineto): where it came from, and what such a
// trace cannot tell (the model's settings, the engine's predictions, the device's peak), so that those sections say
// "unknown for an imported run" instead of printing zeros.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "profiler/trace/run_info.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

// A few lines for the text report: the source, ranks, groups and what is unknown.
std::string imported_header(const prof::RunInfo& run, const prof::TraceStore& store);
// Per rank, the peaks of the [memory] counters (allocated, reserved; null when the trace has none).
nlohmann::json imported_memory_json(const prof::TraceStore& store);
// The planner comparison's note: it needs the model and the layout, which a Kineto trace does not hold.
std::string imported_planner_note();
// The report's sections an imported run cannot fill, with why (JSON: section -> reason).
nlohmann::json imported_unknowns();

}  // namespace us::app
