// The Attach window's state (attach_state.h).
#include "app/gui/state/attach_state.h"

#include <fmt/core.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>

namespace us::gui {
namespace {

namespace fs = std::filesystem;

constexpr double kFirstLookS = 2.5;  // a poll every 1 s (KINETO_CONFIG) is seen twice

// JOB-YYYYmmdd-HHMMSS under the captures folder, a new one each time.
std::string capture_folder(const std::string& root, const std::string& job_id) {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
    const std::string base = fmt::format("{}/{}-{}", root, job_id.empty() ? "job" : job_id, stamp);
    std::string path = base;
    std::error_code ec;
    for (int n = 2; fs::exists(path, ec); ++n) path = fmt::format("{}-{}", base, n);
    return path;
}

}  // namespace

std::string default_captures_dir() {
    if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
        return std::string(cache) + "/ultrascope/captures";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : "/tmp") + "/.cache/ultrascope/captures";
}

void AttachState::show() {
    open = true;
    if (!listing.started()) relist();
}

void AttachState::relist() {
    if (worker.running()) return;  // the capture arms through the endpoint the listing owns
    listing.start(agents, token);
}

void AttachState::capture(const std::string& job_id) {
    if (worker.running() || worker.has_outcome()) return;
    error.clear();
    last_message.clear();
    if (!listing.started()) relist();
    if (!listing.error().empty()) {
        error = listing.error();
        return;
    }
    app::CaptureOptions o = listing.capture_target();
    o.job = job_id;
    o.steps = steps;
    o.timeout_s = timeout_s;
    o.out = out_dir.empty() ? capture_folder(default_captures_dir(), job_id) : out_dir;
    worker.start(o, listing.daemon());
}

std::optional<AttachState::Captured> AttachState::poll(bool source_idle) {
    if (!open && !worker.running() && listing.started()) listing.close();  // the endpoint is released
    if (listing.started()) listing.poll();
    if (auto_pending() && listing.started() && !worker.running() && !worker.has_outcome() && source_idle) {
        ++m_auto_started;
        steps = auto_capture_steps;
        capture("");
    }
    std::optional<app::CaptureOutcome> outcome = worker.take_outcome();
    if (!outcome) return std::nullopt;
    if (!outcome->ok) {
        error = outcome->error;
        m_failure = "capture: " + error;
        m_auto_started = auto_capture_count;  // the captures asked for at start stop at the first failure
        return std::nullopt;
    }
    const app::CaptureWritten& w = outcome->written;
    last_message = w.message;
    if (!w.same_steps)
        error = fmt::format(
            "the ranks did not capture the same steps, even with roundup {}: the files are kept as captured (see "
            "below); capture again",
            outcome->roundup);
    if (out_dir == outcome->folder) out_dir.clear();  // a folder named once: the next capture needs a new one
    const int n = ++m_captures[outcome->job_id];
    return Captured{outcome->folder, fmt::format("capture {} of job {}, steps 1-{} ({} ranks)", n, outcome->job_id,
                                                 w.steps, w.rank_files.size())};
}

bool AttachState::busy() const {
    if (worker.running() || worker.has_outcome() || auto_pending()) return true;
    return open && listing.started() && listing.error().empty() &&
           (listing.asking() || (listing.jobs().empty() && listing.listening_s() < kFirstLookS));
}

int AttachState::captures_of(const std::string& job_id) const {
    const auto it = m_captures.find(job_id);
    return it == m_captures.end() ? 0 : it->second;
}

}  // namespace us::gui
