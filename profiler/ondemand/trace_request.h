// What a capture asks each rank for: the Kineto on-demand config text for N optimizer steps and the file the rank
// then writes. PROFILE_START_ITERATION=0 with a ROUNDUP makes every rank start at the next multiple of R after
// the request reached it, so ranks armed a poll apart still start on the same step when R spans that poll;
// ACTIVITIES_DURATION_MSECS=0 makes a request that comes before the first optimizer step be dropped (and sent
// again) instead of becoming an empty trace.
#pragma once

#include <string>

namespace us::prof {

struct TraceRequest {
    int steps = 3;      // ACTIVITIES_ITERATIONS
    int roundup = 100;  // PROFILE_START_ITERATION_ROUNDUP
    std::string tag;    // unique per capture: names the files
};

// Kineto writes only under /tmp unless the job sets KINETO_ONDEMAND_TRACE_DIR: its directory, or "/tmp".
std::string trace_directory(const std::string& job_trace_dir);
// DIR/ultrascope-TAG.json: what the config names; Kineto adds the pid (file_of).
std::string trace_request_base(const TraceRequest& request, const std::string& job_trace_dir);
std::string trace_request_config(const TraceRequest& request, const std::string& base);
std::string trace_request_file(const std::string& base, int pid);  // DIR/ultrascope-TAG_PID.json
std::string new_capture_tag();  // time and random bits: two captures never share files

}  // namespace us::prof
