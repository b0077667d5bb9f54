// A hung job in the GUI: Flight Recorder dumps opened (`ultrascope DUMPS`, File > Open: files, folders, globs) are
// found, read and analysed on worker threads, so the frame never waits on 4,096 files; a live run that hung hands
// its analysis over through show(). Either way the Hang view comes to the front (the hung_job opening layout) and
// draws what this holds: the analysis, the dumps it was made of, the group and rank picked, and the grid and entries
// made for that pick (remade only when the pick changes, not every frame).
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/model/hang_entries.h"
#include "app/gui/model/hang_model.h"
#include "app/gui/state/message_log.h"
#include "profiler/hang/dump_files.h"
#include "profiler/hang/hang_analysis.h"

namespace us::gui {

struct LoadedHang {
    std::string label;  // what was opened: "12 dumps in /tmp/dumps", "run 3: its ranks' dumps"
    hang::DumpSet dumps;
    hang::HangAnalysis analysis;
};

class HangState {
public:
    explicit HangState(MessageLog& log) : m_log(log) {}
    ~HangState() { close(); }

    // Reads and analyses the dumps `paths` name on worker threads, in place of the dumps shown before.
    void open(std::vector<std::string> paths);
    // The hook for a run that stopped progressing: its ranks' dumps and their analysis (made by whoever collected
    // them, off the frame) shown, and the Hang view brought to the front.
    void show(hang::HangAnalysis analysis, hang::DumpSet dumps, std::string label);
    // Another source replaces it: a read under way stops at its next file.
    void close();
    // Once per frame: installs a finished read (the files left out and its verdict go to the log, a failure as an
    // error).
    void poll();

    bool loading() const { return m_job.valid(); }
    bool active() const { return loading() || m_loaded != nullptr; }  // the Hang view has something to say
    const LoadedHang* loaded() const { return m_loaded.get(); }
    // While loading: "reading 812 of 4,096 dump files, 2.1 s" (then "analysing ...").
    std::string progress_line() const;
    // True once after dumps come in: the frame focuses the Hang view.
    bool take_bring_forward() { return std::exchange(m_bring_forward, false); }

    // The view's picks: the group (an index in the analysis' groups) and the rank whose entries show (-1: none).
    int group = -1;
    int picked_rank = -1;
    // The picked group's grid, and the picked rank's entries (made on first use after a pick changes).
    const HangGrid& grid();
    const std::vector<HangEntryRow>& entries();
    const HangGrid* grid_made() const { return m_grid_group == group && m_loaded ? &m_grid : nullptr; }
    // The groups the selector offers (hang_model.h), made once per analysis.
    const std::vector<HangGroupChoice>& choices() const { return m_choices; }

private:
    void install(std::unique_ptr<LoadedHang> loaded);

    MessageLog& m_log;
    std::future<std::unique_ptr<LoadedHang>> m_job;
    std::shared_ptr<hang::DumpReadProgress> m_progress;
    std::shared_ptr<std::atomic<size_t>> m_files_total;
    std::chrono::steady_clock::time_point m_started{};
    std::unique_ptr<LoadedHang> m_loaded;
    bool m_bring_forward = false;
    std::vector<HangGroupChoice> m_choices;
    HangGrid m_grid;
    int m_grid_group = -2;
    std::vector<HangEntryRow> m_entries;
    int m_entries_rank = -2, m_entries_group = -2;
};

// Finds, reads and analyses the dumps `paths` name (UserError when none can be read), counting the files found and
// read; stops early (null) once `progress` is cancelled.
std::unique_ptr<LoadedHang> load_hang(const std::vector<std::string>& paths, std::atomic<size_t>& files_total,
                                      hang::DumpReadProgress& progress);

}  // namespace us::gui
