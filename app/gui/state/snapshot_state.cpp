// PyTorch memory snapshots opened in the GUI, read and analysed off the frame (snapshot_state.h).
#include "app/gui/state/snapshot_state.h"

#include <chrono>

#include "common/core/check.h"

namespace us::gui {

std::vector<LoadedSnapshot> load_snapshots(const std::vector<std::string>& paths, size_t timeline_samples) {
    std::vector<LoadedSnapshot> out;
    for (snap::RankSnapshot& r : snap::load_rank_snapshots(paths, timeline_samples)) {
        LoadedSnapshot l{std::move(r), {}};
        for (const auto& d : l.analysis.devices) l.series.push_back(snap::build_series(*l.snapshot, d));
        out.push_back(std::move(l));
    }
    return out;
}

void SnapshotState::open(std::vector<std::string> paths) {
    m_pending =
        std::async(std::launch::async, [paths = std::move(paths)] { return load_snapshots(paths, kTimelineSamples); });
}

std::optional<std::string> SnapshotState::poll() {
    if (!m_pending.valid() || m_pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        return std::nullopt;
    try {
        m_loaded = m_pending.get();
        selected = 0, device = 0, show = true, zoom = SnapshotZoom{};
    } catch (const std::exception& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

}  // namespace us::gui
