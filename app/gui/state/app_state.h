// The GUI's state, as owners with one job each: the launch settings the panel edits, the data source (launched,
// attached or a file), what is derived from it for the views (built on a worker), the shared time window, the runs
// kept for comparison and the messages. AppState composes them and holds the rules that span several: a source
// change resets what was derived from the old one and archives its run, auto-relaunch, the exit code. Views are
// functions of these owners; nothing here blocks the frame.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "app/gui/state/attach_state.h"
#include "app/gui/state/data_source.h"
#include "app/gui/state/derived_views.h"
#include "app/gui/state/hang_state.h"
#include "app/gui/state/large_run.h"
#include "app/gui/state/lesson_player.h"
#include "app/gui/state/planner_state.h"
#include "app/gui/model/launch_settings.h"
#include "app/gui/model/opening_layout.h"
#include "app/gui/options/gui_options.h"
#include "app/gui/state/message_log.h"
#include "app/gui/state/run_comparison.h"
#include "app/gui/state/snapshot_state.h"
#include "app/gui/state/view_states.h"
#include "app/gui/state/view_window.h"

namespace us::gui {

// Where a view was drawn in the window (screenshot checks, highlights).
struct ViewRegion {
    float x = 0, y = 0, w = 0, h = 0;
};

// What the Ranks view reads: every rank's digest and the blame made of them, from the shown run's report, or from
// a run too large to hold whole (LargeRun).
struct RanksSource {
    const std::vector<prof::RankDigest>* digests = nullptr;
    const prof::Blame* blame = nullptr;
    const std::vector<prof::CoreSharing>* core_sharing = nullptr;  // which ranks share a machine's cores
    bool from_digests = false;                                     // the large run's (its spans are not in the store)
};

class AppState {
public:
    explicit AppState(const GuiOptions& options);
    ~AppState();

    // ---- the owners (views read and edit these)
    LaunchSettings settings;           // what the launch panel edits
    LaunchSettings launched_settings;  // what the launched run runs
    bool auto_relaunch = false;        // relaunch when the settings change and settle
    MessageLog log;
    DataSource source;        // declared before `derived`, whose worker reads its store
    LargeRun large_run{log};  // a run opened from its digests; its picked ranks load into `source`
    DerivedViews derived;
    ViewWindow window;
    RunComparison comparison;
    LessonPlayer lessons;                       // the open workshop lesson (File > Lessons)
    PlannerState planner;                       // File > New plan
    SnapshotState snapshots;                    // PyTorch memory snapshots opened (their own window)
    HangState hang{log};                        // a hung job's Flight Recorder dumps and their analysis
    AttachState attach_job;                     // File > Attach to a PyTorch job: its captures open as runs
    ViewStates views;                           // each view's own state from frame to frame
    std::map<std::string, ViewRegion> regions;  // this frame's views (screenshot checks)

    // ---- what spans several owners
    void launch();  // the panel's settings
    void stop();
    // The launched run's last checkpoint (written at `step`, to `path`), if it wrote one.
    struct Checkpoint {
        int step = 0;
        std::string path;
    };
    std::optional<Checkpoint> last_checkpoint() const;
    // Relaunches the last launched run from its last checkpoint, with the same settings and --steps.
    void resume_from_checkpoint();
    // A trace (ours, or PyTorch profiler files and folders: one rank per file, shown as they are read), a PyTorch
    // memory snapshot, which opens in the snapshot window, or a hung job's Flight Recorder dumps (the Hang view).
    void open_trace(const std::vector<std::string>& paths, const std::string& label = {});  // label: else the paths
    void attach(const std::string& listen);                                                 // [HOST:]PORT
    RanksSource ranks_source() const;
    // What a view with no rank to show says: "no data yet" while a run or a load may still bring some; where an open
    // failed (a trace without any rank's data), why.
    std::string no_ranks_words() const;
    // What is open, as the layout the window opens on sees it (model/opening_layout.h): a hung job's dumps, a trace
    // of several ranks from elsewhere (held whole, being read, or opened from its digests), or an engine run (or
    // nothing yet).
    Opened opened() const;
    const OpeningLayout& layout() const { return opening_layout(opened()); }
    // The Ranks view's pick: in a run held whole the timeline scrolls to the first rank; in a large run the ranks
    // (with the ranks they waited for, when `with_peers`) are read whole into the timeline.
    void open_ranks(const std::vector<int>& ranks, bool with_peers);
    void detach();
    // Shows a store that is already loaded (a trace that finished loading from `path`, a planner's prediction with
    // no path, benchmarks, tests).
    void adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label, const std::string& path = {});
    // "measured", or for a planner's prediction shown in the views, "predicted": the word every view puts on the
    // figures it reads from the store.
    bool showing_prediction() const { return store() && store()->is_prediction(); }
    const char* provenance() const { return showing_prediction() ? "predicted" : "measured"; }
    void update();  // once per frame
    // The Planner's layout `index` (of its ranked result): its predicted step shown in the views (the Planner window
    // closes so that they show; File > New plan brings it back as it was), or launched on this machine.
    void show_planned(size_t index);
    void launch_planned(size_t index);

    const prof::TraceStore* store() const { return source.store(); }
    void fit_all() {
        if (const prof::TraceStore* s = store()) window.fit_all(*s);
    }
    const prof::Report& report() const { return derived.report(); }
    const GuiOptions& options() const { return m_options; }
    int exit_code() const;  // for --exit-when-done: the run's result

private:
    // Before the source changes: the derived build must stop reading the old store, and the old run's figures go
    // to the comparison.
    void leave_source();
    void refresh_derived(bool force);
    void update_source();   // the source, the derived data, auto-relaunch
    void update_planner();  // a finished search, and --plan-show / --plan-launch

    GuiOptions m_options;
    int m_run_counter = 0;
    LaunchSettings m_pending;  // auto-relaunch waits until the settings stop changing
    std::chrono::steady_clock::time_point m_pending_since{};
    bool m_pending_checked = false;                // auto-relaunch has tried these settings
    std::pair<int64_t, int64_t> m_load_fit{0, 0};  // the window fitted to a loading run's first ranks
};

}  // namespace us::gui
