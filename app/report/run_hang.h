// A run's own Flight Recorder dumps — the engine's, kept in its trace (RankTrace::flight_dump) when a hung run was
// asked for them — read and analysed as `ultrascope report DUMPS` analyses PyTorch's: what held the run, first in
// its report (docs/engine-flight-recorder.md).
#pragma once

#include <optional>

#include "profiler/hang/hang_analysis.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

struct RunHang {
    hang::DumpSet dumps;
    hang::HangAnalysis analysis;
};

// Nothing when no rank of the run sent a dump; a dump that cannot be read is named among the analysis' problems.
std::optional<RunHang> run_hang_of(const prof::TraceStore& store);

}  // namespace us::app
