// The on-demand config a capture sends (trace_request.h).
#include "profiler/ondemand/trace_request.h"

#include <fmt/core.h>

#include <chrono>
#include <random>

namespace us::prof {

std::string trace_directory(const std::string& job_trace_dir) {
    std::string dir = job_trace_dir.empty() ? std::string("/tmp") : job_trace_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir;
}

std::string trace_request_base(const TraceRequest& request, const std::string& job_trace_dir) {
    return trace_directory(job_trace_dir) + "/ultrascope-" + request.tag + ".json";
}

std::string trace_request_config(const TraceRequest& request, const std::string& base) {
    return fmt::format(
        "ACTIVITIES_LOG_FILE={}\nPROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP={}\n"
        "ACTIVITIES_ITERATIONS={}\nACTIVITIES_DURATION_MSECS=0\n",
        base, request.roundup, request.steps);
}

std::string trace_request_file(const std::string& base, int pid) {
    const size_t dot = base.find(".json");  // Kineto puts the pid before the first ".json"
    if (dot == std::string::npos) return base;
    return base.substr(0, dot) + fmt::format("_{}", pid) + base.substr(dot);
}

std::string new_capture_tag() {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    std::random_device rd;
    return fmt::format("{}-{:06x}", std::chrono::duration_cast<std::chrono::seconds>(now).count(), rd() & 0xffffff);
}

}  // namespace us::prof
