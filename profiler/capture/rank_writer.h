// Pass two of a capture: one rank's raw trace copied event by event into the rank file Ultrascope's folder reader
// opens, with what the raw trace lacks added: distributedInfo (the rank and world size from the process's
// environment) and a ProfilerStep#K span per derived step (step_check.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/capture/captured_rank.h"
#include "profiler/capture/raw_trace.h"

namespace us::capture {

// The distributedInfo the rank file carries: the trace's own when it has one, with rank, world_size, backend and
// pg_config filled in where it says nothing. pg_config lists the default group (every rank of the world) and the
// groups the events' args name; other groups of the job are not in an on-demand trace.
nlohmann::json distributed_info_for(const RawTrace& trace, const CapturedRank& rank);

// Writes the rank file to `path` (gzip when `gz`), `steps` added as ProfilerStep#1.. spans unless the trace has
// ProfilerStep# spans of its own. Throws UserError when the trace cannot be read again or the file not written; the
// caller removes what is at `path` then.
void write_rank_file(const RawTrace& trace, const CapturedRank& rank, const std::vector<TimeSpan>& steps,
                     const std::string& path, bool gz);

}  // namespace us::capture
