// `ultrascope capture` (capture_run.h): capture_job's events printed as the CLI always printed them, then what it
// wrote.
#include "app/capture/capture_run.h"

#include <fmt/core.h>

#include <mutex>

#include "app/capture/capture_job.h"
#include "common/core/check.h"

namespace us::app {
namespace {

void list_jobs(const CaptureOptions& o, std::FILE* out) {
    US_CHECK_INPUT(!o.agents.empty(),
                   "--list asks agents for their jobs: give --agents HOST:PORT,... (or start "
                   "`ultrascope agent` here and name it)");
    for (const AgentAddress& a : capture_agents(o)) {
        const nlohmann::json answer = agent_jobs(a);
        std::fprintf(out, "%s (%s):\n", a.name().c_str(), answer.value("host", std::string("?")).c_str());
        if (answer["jobs"].empty()) std::fprintf(out, "  no PyTorch job polls this node\n");
        for (const nlohmann::json& j : answer["jobs"])
            std::fprintf(out, "  %s\n", j.value("describe", std::string()).c_str());
    }
}

// The progress as lines on `log`; a rank's state is in the line that follows it.
CaptureCallbacks printing_callbacks(std::FILE* log, std::mutex& log_mutex) {
    CaptureCallbacks callbacks;
    callbacks.on_event = [log, &log_mutex](const CaptureEvent& e) {
        std::lock_guard lock(log_mutex);
        if (e.kind == CaptureEvent::Kind::line && e.node.empty())
            std::fprintf(log, "capture: %s\n", e.text.c_str());
        else if (e.kind == CaptureEvent::Kind::line)
            std::fprintf(log, "capture: [%s] %s\n", e.node.c_str(), e.text.c_str());
        else if (e.kind == CaptureEvent::Kind::retried)
            std::fprintf(log,
                         "capture: the ranks captured different steps (--roundup %d is fewer than the steps one poll "
                         "interval spans):\n%s\ncapture: again with --roundup %d\n",
                         e.roundup, e.text.c_str(), e.roundup * 4);
    };
    return callbacks;
}

}  // namespace

int run_capture(const CaptureOptions& o, std::FILE* out, std::FILE* log) {
    if (o.list) {
        list_jobs(o, out);
        return 0;
    }
    std::mutex log_mutex;
    const CaptureOutcome done = capture_job_or_throw(o, printing_callbacks(log, log_mutex));
    const CaptureWritten& written = done.written;
    std::fprintf(out, "captured %d step%s of job %s on %zu rank%s:\n", written.steps, written.steps == 1 ? "" : "s",
                 done.job_id.c_str(), written.rank_files.size(), written.rank_files.size() == 1 ? "" : "s");
    for (const std::string& f : written.rank_files) std::fprintf(out, "  %s\n", f.c_str());
    if (!written.message.empty()) std::fprintf(out, "%s\n", written.message.c_str());
    if (!written.same_steps) {
        std::fprintf(out,
                     "the ranks did not capture the same steps, even with --roundup %d: the files are kept as "
                     "captured; capture again with a larger --roundup (more than the steps the job makes in one poll "
                     "interval)\n",
                     done.roundup);
        return 3;  // written, but not a consistent capture
    }
    std::fprintf(out, "open it: ultrascope %s    or: ultrascope report %s\n", o.out.c_str(), o.out.c_str());
    return 0;
}

}  // namespace us::app
