// PyTorch memory snapshots opened in the GUI (`ultrascope SNAPSHOT.pickle`, File > Open): read and analysed on a
// worker so the frame never waits on a large file, then shown by the snapshot view. Several ranks' snapshots open
// together; a new open replaces them.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "profiler/snapshot/snapshot_series.h"
#include "profiler/snapshot/snapshot_set.h"

namespace us::gui {

struct LoadedSnapshot : snap::RankSnapshot {
    std::vector<snap::SnapshotSeries>
        series;  // per device of the analysis (empty without a trace): any window's detail
};

// The slice of a device's trace the plot shows, [e0, e1) in entries (e1 = 0: all of it), and its samples, re-made
// only when the window, the device or the width changes.
struct SnapshotZoom {
    size_t e0 = 0, e1 = 0;
    int selected = -1, device = -1;
    size_t columns = 0, made_e0 = SIZE_MAX, made_e1 = SIZE_MAX;
    std::vector<snap::SeriesSample> samples;
};

class SnapshotState {
public:
    // Timeline samples per device: what the plot draws zoomed all the way out (each the largest values of its slice).
    static constexpr size_t kTimelineSamples = 4096;

    void open(std::vector<std::string> paths);
    // Once per frame: takes a finished load. Returns what went wrong when it failed (the old snapshots stay).
    std::optional<std::string> poll();
    bool loading() const { return m_pending.valid(); }
    const std::vector<LoadedSnapshot>& snapshots() const { return m_loaded; }
    bool empty() const { return m_loaded.empty(); }

    bool show = false;  // the snapshot window is open
    int selected = 0;   // the snapshot shown (index into snapshots())
    int device = 0;     // the device shown (index into its analysis' devices)
    SnapshotZoom zoom;  // the plot's window

private:
    std::future<std::vector<LoadedSnapshot>> m_pending;
    std::vector<LoadedSnapshot> m_loaded;
};

// Reads and analyses snapshots (UserError naming the file on bad input), ranks in order.
std::vector<LoadedSnapshot> load_snapshots(const std::vector<std::string>& paths, size_t timeline_samples);

}  // namespace us::gui
