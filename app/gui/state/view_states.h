// Each view's own state from one frame to the next, owned by AppState (app.views): what a view remembers (a pick, a
// toggle, what it computed last) is here, never a static in the view's file, so that a benchmark or a test starts
// every view from a known state. What the views share (the time window, the selected rank) is ViewWindow's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/gui/model/launch_settings.h"
#include "app/gui/model/ranks_model.h"
#include "app/gui/state/memory_categories.h"

namespace us::gui {

// The run panel (views/launch_panel.cpp): the settings last checked and what the check said, redone only when
// they change (the check reads the preset file); the preset combo's names, read once.
struct LaunchPanelState {
    std::vector<std::string> presets;
    bool presets_read = false;
    bool checked_once = false;
    LaunchSettings checked;
    std::string problem, prediction;
};

// The memory view (views/memory.cpp): the band of what the process holds beyond the categories: -1 automatic,
// 0 hidden, 1 shown.
struct MemoryViewState {
    int process_band = -1;
};

// The memory view of an imported trace (widgets/imported_memory.cpp): each step's peak per series, computed once
// per rank and store version, not every frame.
struct ImportedMemoryState {
    uint64_t version = UINT64_MAX;
    int rank = -1;
    std::map<int, std::vector<int64_t>> peaks;
};

// The Ranks view (views/ranks.cpp): the figure, order and grouping picked, and the rank picked.
struct RanksViewState {
    RankFigure figure = RankFigure::suffered;
    RankOrder order = RankOrder::rank;
    std::string group_by;
    int picked = -1;  // a rank
};

// The snapshot view (views/snapshot.cpp): where a zoom drag started (-1: none).
struct SnapshotViewState {
    float drag_from = -1;
};

// The Planner view (views/planner.cpp): the models and clusters it offers, read once.
struct PlannerViewState {
    std::vector<std::string> models, clusters;
    bool lists_read = false;
};

struct ViewStates {
    LaunchPanelState launch;
    MemoryViewState memory;
    ImportedMemoryState imported_memory;
    MemoryCategories memory_categories;
    RanksViewState ranks;
    SnapshotViewState snapshot;
    PlannerViewState planner;
};

}  // namespace us::gui
