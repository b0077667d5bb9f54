// What the report says about a run imported from PyTorch's profiler (Kineto): where it came from, and what such a
// trace cannot tell (the model's settings, the engine's predictions, the device's peak), so that those sections say
// "unknown for a PyTorch trace" instead of printing zeros. The report's text and JSON and the GUI read it here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/trace/run_info.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// A few lines for the text report: the source, ranks, groups and what is unknown.
std::string imported_header(const RunInfo& run, const TraceStore& store);
// Per rank, the peaks of the [memory] counters (allocated, reserved; null when the trace has none).
nlohmann::json imported_memory_json(const TraceStore& store);
// Adds a warning where the files say a larger world than they hold ("no file for ranks 1, 3").
void warn_of_missing_ranks(const TraceStore& store, std::vector<std::string>& warnings);
// The planner comparison's note: it needs the model and the layout, which a Kineto trace does not hold.
std::string imported_planner_note();
// The report's sections an imported run cannot fill, with why (JSON: section -> reason).
nlohmann::json imported_unknowns();
// The report's JSON (report_json) made true for an imported run: every figure only the engine can give (its
// settings, predictions and formulas, the tracked allocator's categories, the engine's process groups) set to null,
// not left at zero, with "unknown_for_imported_run" saying why, and the [memory] counters' peaks beside it.
void mark_imported_unknowns(nlohmann::json& report, const TraceStore& store);

}  // namespace us::prof
