// What the report adds for a run imported from PyTorch (a Kineto trace: the run's settings are unknown, so there
// is no prediction to sit next to): exposed communication by process group, named through the run description;
// idle time per rank; the slowest rank; the pipeline found from the sends and receives. All measured; what the
// trace cannot tell is null.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "profiler/analysis/pipeline_stages.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

bool is_imported_run(const TraceStore& store);

struct ImportedRun {
    nlohmann::json json;  // the report's "imported" object (docs/report-schema.md)
    std::string text;     // its section of the text report
};

// `pipelines`: the run's, from its digests (cross_rank.h).
ImportedRun imported_run_section(const TraceStore& store, const PipelineStages& pipelines);

// The name of a span's process group: the run description's for an imported group (its name, kind and
// description), kGroupKinds' for the engine's, else "group N".
std::string process_group_name(const RankTrace& rt, int group);

}  // namespace us::prof
