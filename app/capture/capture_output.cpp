// A capture's folder, written whole or not at all (capture_output.h).
#include "app/capture/capture_output.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/check.h"
#include "profiler/capture/captured_rank.h"

namespace us::app {
namespace {
namespace fs = std::filesystem;
}

CaptureWritten finish_captured_ranks(const std::vector<CapturedTrace>& ranks, const std::string& dir,
                                     const std::string& shown_dir) {
    const capture::CaptureSummary done = capture::finish_capture(ranks, dir, shown_dir);
    return CaptureWritten{done.rank_files, done.steps, done.same_steps, done.message};
}

void check_capture_folder(const std::string& out_dir) {
    std::error_code ec;
    US_CHECK_INPUT(!fs::exists(out_dir, ec) || (fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec)),
                   "{} exists and is not an empty folder: name a new one for the capture", out_dir);
}

CaptureWritten write_capture(const std::vector<CapturedTrace>& ranks, const std::string& out_dir) {
    check_capture_folder(out_dir);
    const fs::path target = fs::absolute(out_dir).lexically_normal();
    std::error_code ec;
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    const fs::path staging = parent / fmt::format(".{}.partial-{}", target.filename().string(), ::getpid());
    fs::remove_all(staging, ec);
    US_CHECK_INPUT(fs::create_directory(staging, ec), "cannot write in {}: {}", parent.string(), ec.message());
    CaptureWritten written;
    try {
        written = finish_captured_ranks(ranks, staging.string(), target.string());
        if (fs::exists(target, ec)) fs::remove(target, ec);  // empty: checked above
        fs::rename(staging, target, ec);
        US_CHECK_INPUT(!ec, "cannot move the capture into {}: {}", target.string(), ec.message());
    } catch (...) {
        fs::remove_all(staging, ec);
        throw;
    }
    for (std::string& f : written.rank_files) f = (target / fs::path(f).filename()).string();
    return written;
}

}  // namespace us::app
