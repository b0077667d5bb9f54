// A hung job's dumps opened, read and analysed off the frame (hang_state.h). The files are read here, one pool of
// threads over hang::load_flight_dump, rather than with hang::load_dumps, so that the frame can count the files read
// and a close can stop the read between files; the checks and the analysis are the library's (check_dumps,
// analyze_hang), the same the report makes.
#include "app/gui/state/hang_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/core/check.h"
#include "profiler/hang/flight_reader.h"

namespace us::gui {

namespace fs = std::filesystem;

namespace {

// Reads `files` on every core but one (the frame's), each file once; a file that cannot be read is a problem.
std::vector<flight::FlightDump> read_dumps(const std::vector<std::string>& files, std::atomic<size_t>& done,
                                           const std::atomic<bool>& cancel, std::vector<std::string>& problems) {
    std::vector<flight::FlightDump> dumps(files.size());
    std::vector<std::string> errors(files.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i; !cancel && (i = next.fetch_add(1)) < files.size(); ++done) {
            try {
                dumps[i] = hang::load_flight_dump(files[i]);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        }
    };
    const unsigned cores = std::max(2u, std::thread::hardware_concurrency()) - 1;
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < std::min<size_t>(cores, files.size()); ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    std::vector<flight::FlightDump> read;
    for (size_t i = 0; i < files.size(); ++i) {
        if (!errors[i].empty())
            problems.push_back("left out: " + errors[i]);
        else
            read.push_back(std::move(dumps[i]));
    }
    return read;
}

std::string paths_label(const std::vector<std::string>& paths) {
    std::string out;
    for (size_t i = 0; i < paths.size() && i < 3; ++i) out += (i ? ", " : "") + paths[i];
    return paths.size() > 3 ? out + fmt::format(" and {} more", paths.size() - 3) : out;
}

}  // namespace

std::unique_ptr<LoadedHang> load_hang(const std::vector<std::string>& paths, std::atomic<size_t>& files_total,
                                      std::atomic<size_t>& files_done, const std::atomic<bool>& cancel) {
    const std::vector<std::string> files = hang::find_dump_files(paths);
    files_total = files.size();
    std::vector<std::string> problems;
    std::vector<flight::FlightDump> read = read_dumps(files, files_done, cancel, problems);
    if (cancel) return nullptr;
    US_CHECK_INPUT(!read.empty(), "none of the {} file(s) named by {} could be read as a Flight Recorder dump: {}",
                   files.size(), paths_label(paths), problems.empty() ? "no file" : problems.front());
    auto loaded = std::make_unique<LoadedHang>();
    loaded->dumps = hang::check_dumps(std::move(read));
    loaded->dumps.problems.insert(loaded->dumps.problems.begin(), problems.begin(), problems.end());
    loaded->dumps.files = files.size();
    loaded->analysis = hang::analyze_hang(loaded->dumps);
    loaded->label =
        fmt::format("{} Flight Recorder dump{} ({})", files.size(), files.size() == 1 ? "" : "s", paths_label(paths));
    return loaded;
}

void HangState::open(std::vector<std::string> paths) {
    close();
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    m_files_total = std::make_shared<std::atomic<size_t>>(0);
    m_files_done = std::make_shared<std::atomic<size_t>>(0);
    m_started = std::chrono::steady_clock::now();
    m_log.message("reading Flight Recorder dumps: " + paths_label(paths));
    m_job = std::async(std::launch::async, [paths = std::move(paths), cancel = m_cancel, total = m_files_total,
                                            done = m_files_done] { return load_hang(paths, *total, *done, *cancel); });
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
        *m_cancel = true;
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
    // it and the rest is shown; a repair is a message.
    const auto& problems = loaded->dumps.problems;
    size_t left_out = 0;
    for (const std::string& p : problems) {
        const bool out = p.find("left out") != std::string::npos;
        if (out && left_out++ == 0)
            m_log.fail(fmt::format("{} (of {} files, {} left out; the rest analysed)", p, loaded->dumps.files,
                                   std::count_if(problems.begin(), problems.end(), [](const std::string& q) {
                                       return q.find("left out") != std::string::npos;
                                   })));
        else
            m_log.message("dumps: " + p);
    }
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
    const size_t total = *m_files_total, done = *m_files_done;
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
