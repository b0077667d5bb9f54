// A hang analysis as the report prints it: `report --json`'s "hang" object (docs/report-schema.md) and the text,
// its verdict in one sentence first. The command's report of dumps, the trace report of a run that hung, the lesson
// and the GUI all show these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "profiler/hang/hang_analysis.h"

namespace us::hang {

nlohmann::json hang_json(const HangAnalysis& a);
nlohmann::json collective_json(const CollectiveCall& c);  // null for none (seq_id -1)
// The text: the verdict, its evidence, the hung groups (the ones that agree counted, not listed), the dumps.
std::string format_hang(const HangAnalysis& a);

}  // namespace us::hang
