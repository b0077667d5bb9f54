// A capture's folder, written whole or not at all (capture_output.h).
#include "app/capture/capture_output.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/core/check.h"

namespace us::app {
namespace {
namespace fs = std::filesystem;
}

CaptureWritten finish_captured_ranks(const std::vector<CapturedTrace>& ranks, const std::string& dir) {
    CaptureWritten out;
    for (const CapturedTrace& r : ranks) {
        nlohmann::json trace = nlohmann::json::parse(r.raw_trace, nullptr, false);
        US_CHECK_INPUT(!trace.is_discarded() && trace.is_object(), "rank {}'s trace (pid {} on {}) is not JSON", r.rank,
                       r.pid, r.host);
        trace["distributedInfo"] = {{"rank", r.rank}, {"world_size", r.world_size}, {"local_rank", r.local_rank}};
        const std::string path = fmt::format("{}/rank{}.json", dir, r.rank);
        std::ofstream file(path, std::ios::binary);
        file << trace.dump();
        US_CHECK_INPUT(file.good(), "cannot write {}", path);
        out.rank_files.push_back(path);
    }
    return out;
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
        written = finish_captured_ranks(ranks, staging.string());
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
