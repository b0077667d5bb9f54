// A hung job's dumps opened, read and analysed off the frame (hang_state.h), with the library's reader, checks and
// analysis (load_dumps, analyze_hang): the report's own. The read counts its files for the frame's progress line and
// stops between files when the view closes.
#include "app/gui/state/hang_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "common/core/check.h"

namespace us::gui {

namespace {

std::string paths_label(const std::vector<std::string>& paths) {
    std::string out;
    for (size_t i = 0; i < paths.size() && i < 3; ++i) out += (i ? ", " : "") + paths[i];
    return paths.size() > 3 ? out + fmt::format(" and {} more", paths.size() - 3) : out;
}

}  // namespace

std::unique_ptr<LoadedHang> load_hang(const std::vector<std::string>& paths, std::atomic<size_t>& files_total,
                                      hang::DumpReadProgress& progress) {
    const std::vector<std::string> files = hang::find_dump_files(paths);
    files_total = files.size();
    const unsigned every_core_but_the_frames = std::max(2u, std::thread::hardware_concurrency()) - 1;
    hang::DumpSet dumps = hang::load_dumps(files, every_core_but_the_frames, &progress);
    if (progress.cancel) return nullptr;
    US_CHECK_INPUT(!dumps.dumps.empty(),
                   "none of the {} file(s) named by {} could be read as a Flight Recorder dump: {}", files.size(),
                   paths_label(paths), dumps.left_out.empty() ? "no file" : dumps.left_out.front());
    auto loaded = std::make_unique<LoadedHang>();
    loaded->dumps = std::move(dumps);
    loaded->analysis = hang::analyze_hang(loaded->dumps);
    loaded->label =
        fmt::format("{} Flight Recorder dump{} ({})", files.size(), files.size() == 1 ? "" : "s", paths_label(paths));
    return loaded;
}

void HangState::open(std::vector<std::string> paths) {
    close();
    m_progress = std::make_shared<hang::DumpReadProgress>();
    m_files_total = std::make_shared<std::atomic<size_t>>(0);
    m_started = std::chrono::steady_clock::now();
    m_log.message("reading Flight Recorder dumps: " + paths_label(paths));
    m_job = std::async(std::launch::async, [paths = std::move(paths), progress = m_progress, total = m_files_total] {
        return load_hang(paths, *total, *progress);
    });
}

void HangState::show(hang::HangAnalysis analysis, hang::DumpSet dumps, std::string label) {
    close();
    auto loaded = std::make_unique<LoadedHang>();
    loaded->label = std::move(label);
    loaded->dumps = std::move(dumps);
    loaded->analysis = std::move(analysis);
    install(std::move(loaded));
}

void HangState::close() {
    if (m_job.valid()) {
        m_progress->cancel = true;
        m_job.wait();
        m_job = {};
    }
    m_loaded.reset();
    m_choices.clear();
    m_grid = {};
    m_grid_group = -2;
    m_entries.clear();
    m_entries_rank = m_entries_group = -2;
    group = picked_rank = -1;
}

void HangState::poll() {
    if (!m_job.valid() || m_job.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    try {
        std::unique_ptr<LoadedHang> loaded = m_job.get();
        if (loaded) install(std::move(loaded));
    } catch (const std::exception& e) {
        m_log.fail(e.what());
    }
}

void HangState::install(std::unique_ptr<LoadedHang> loaded) {
    const hang::HangAnalysis& a = loaded->analysis;
    // A file left out (unreadable, a rank twice, another job's) is an error, as a damaged trace is: the banner names
    // the first and the rest is shown.
    const std::vector<std::string>& left_out = loaded->dumps.left_out;
    if (!left_out.empty())
        m_log.fail(fmt::format("{} (of {} files, {} left out; the rest analysed)", left_out.front(),
                               loaded->dumps.files, left_out.size()));
    for (size_t i = 1; i < left_out.size(); ++i) m_log.message("dumps: " + left_out[i]);
    m_log.message(fmt::format("{}: {}", loaded->label, a.verdict));
    m_loaded = std::move(loaded);
    m_choices = hang_group_choices(a);
    group = default_hang_group(a);
    picked_rank = a.culprit_ranks.empty() ? -1 : a.culprit_ranks.front();
    m_grid_group = -2;
    m_entries_rank = m_entries_group = -2;
    m_bring_forward = true;
}

std::string HangState::progress_line() const {
    if (!loading()) return "";
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
    const size_t total = *m_files_total, done = m_progress->files_done;
    if (total == 0) return fmt::format("finding the dump files, {:.1f} s", s);
    if (done < total) return fmt::format("reading {} of {} dump files, {:.1f} s", done, total, s);
    return fmt::format("analysing {} dumps, {:.1f} s", total, s);
}

const HangGrid& HangState::grid() {
    if (m_loaded && m_grid_group != group) {
        m_grid = build_hang_grid(m_loaded->analysis, m_loaded->dumps, group);
        m_grid_group = group;
    }
    return m_grid;
}

const std::vector<HangEntryRow>& HangState::entries() {
    if (m_loaded && (m_entries_rank != picked_rank || m_entries_group != group)) {
        m_entries = hang_rank_entries(m_loaded->analysis, m_loaded->dumps, picked_rank, group);
        m_entries_rank = picked_rank;
        m_entries_group = group;
    }
    return m_entries;
}

}  // namespace us::gui
