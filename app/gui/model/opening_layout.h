// What the window opens on, chosen by what is open: the one table of that choice (like the table of views beside it,
// view_table.h). A trace of several ranks from elsewhere (PyTorch profiler files, or a run opened from its digests)
// asks which rank holds the run back: the Ranks view, its verdict on top, takes the memory view's window beside the
// timeline (the memory view becomes a tab), and the launch settings fold away under "launch a run" (they describe a
// run to launch, not the one shown). A hung job's Flight Recorder dumps (opened, or a live run's that hung) ask what
// holds the job: the Hang view takes that window, the launch settings folded the same way. A run of the engine
// (launched, attached, its .ustrace, a planner's prediction) opens as it always has. Plain C++ with no ImGui: the
// frame's layout and the run panel read it, the tests check it.
#pragma once

#include <string_view>

#include "app/gui/model/view_table.h"

namespace us::gui {

enum class Opened { engine_run, multi_rank_trace, hung_job };

// What the choice looks at in the source shown.
struct WhatIsOpen {
    bool imported = false;      // a framework's trace (PyTorch profiler files), not a run of the engine's
    int ranks = 0;              // the ranks the trace holds
    bool from_digests = false;  // a run too large to hold whole, opened from its digests (any framework's)
    bool hang = false;          // a hung job's dumps and their analysis (opened, being read, or a live run's)
};

inline Opened opened_kind(const WhatIsOpen& w) {
    if (w.hang) return Opened::hung_job;  // before the trace beside it: a hang is what needs looking at
    return w.from_digests || (w.imported && w.ranks > 1) ? Opened::multi_rank_trace : Opened::engine_run;
}

struct OpeningLayout {
    Opened opened;
    const char* name;             // in the screenshot's facts
    const char* beside_timeline;  // the view in the window below the timeline on the left (Place::bottom_left)
    bool launch_folded;           // the run panel's launch settings folded under "launch a run"
};

inline constexpr OpeningLayout kOpeningLayouts[] = {
    {Opened::engine_run, "engine_run", "memory", false},
    {Opened::multi_rank_trace, "multi_rank_trace", "ranks", true},
    {Opened::hung_job, "hung_job", "hang", true},
};

inline const OpeningLayout& opening_layout(Opened opened) {
    for (const OpeningLayout& l : kOpeningLayouts)
        if (l.opened == opened) return l;
    return kOpeningLayouts[0];
}

// Where `layout` puts a view: the view it names goes beside the timeline, the table's view there becomes a tab (the
// last), every other view stays where the table of views puts it.
inline Place place_in(const OpeningLayout& layout, const ViewName& v) {
    if (std::string_view(v.id) == layout.beside_timeline) return Place::bottom_left;
    if (v.place == Place::bottom_left) return Place::tab;
    return v.place;
}

}  // namespace us::gui
