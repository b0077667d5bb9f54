// Everything the GUI knows: where the data comes from (a run it launched, runs attached from elsewhere, or a trace
// file), the view state shared by the views (the time window, the selected rank), the launch settings, the runs
// kept for comparison, and the derived data (report, curves, memory timelines) rebuilt on a worker thread a few
// times a second from the trace store (derived_worker.h). Views are functions of this state; nothing here blocks: the launched run and the listener are
// pumped once per frame and trace files load on a worker thread.
#pragma once

#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/derived_worker.h"
#include "app/gui/gui.h"
#include "app/gui/model/compare_model.h"
#include "app/gui/model/pipeline_diagram_model.h"
#include "app/gui/model/timeline_model.h"
#include "app/gui/model/training_model.h"
#include "app/launch/live_run.h"
#include "engine/train/config.h"
#include "profiler/analysis/report.h"

namespace us::gui {

// The launch panel's settings. Zero means "the preset's value".
struct LaunchSettings {
    std::string preset = "small";
    int layers = 0, hidden = 0, heads = 0, seq = 0, batch = 0, steps = 0;
    int grad_accum = 1;
    int dp = 2, pp = 1, tp = 1, cp = 1, ep = 1;
    // mixture of experts: 0 experts = the preset's model (dense unless the preset has experts)
    int moe_experts = 0, moe_topk = 2, moe_every = 1;
    float moe_capacity_factor = 0.0f, moe_aux_loss_coef = 0.01f;
    bool sp = false;  // sequence parallelism (with tp > 1)
    std::string cp_balance = "zigzag";
    int zero = 0;
    std::string pp_schedule = "1f1b";
    int pp_chunks = 1;
    std::string recompute = "none";
    std::string attention = "naive";  // naive stores the s x s probabilities; flash keeps a log-sum-exp per row
    std::string precision = "fp32";
    float bucket_mb = 1.0f;
    bool overlap = true;
    // checkpoints: every `save_every` steps (0: only at the end) to `save_path` (empty: none); `load_path` resumes
    std::string save_path;
    int save_every = 0;
    std::string load_path;
    // where the ranks run: the launcher, an Open MPI hostfile, the address they stream back to
    std::string launcher = "mpirun", hostfile, stream_listen = "127.0.0.1";
    std::vector<std::string> extra_args;  // flags the panel does not show (--data FILE, --lr ...), passed through

    int ranks() const { return dp * pp * tp * cp; }  // ep shares the dp ranks
    // Settings from ultrascope-train flags: those the panel shows fill its fields, the rest travel in extra_args.
    static LaunchSettings from_args(const std::vector<std::string>& args);
    // Settings that reproduce a recorded run (its metadata's "config", as --print-config writes it).
    static LaunchSettings from_config(const nlohmann::json& config);
    std::vector<std::string> train_args() const;
    // The resolved configuration; UserError (with the reason) when the settings are invalid.
    TrainConfig resolve() const;
    // The reason the settings cannot be launched, or "" when they can.
    std::string problem() const;
    bool operator==(const LaunchSettings&) const = default;
};

enum class Source { none, launched, attached, file };

struct ViewRegion {
    float x = 0, y = 0, w = 0, h = 0;
};

class AppState {
public:
    explicit AppState(const GuiOptions& options);
    ~AppState();

    // ---- sources
    void launch();
    void stop();
    // The launched run's last checkpoint (written at `step`, to `path`), if it wrote one.
    struct Checkpoint {
        int step = 0;
        std::string path;
    };
    std::optional<Checkpoint> last_checkpoint() const;
    // Relaunches the last launched run from its last checkpoint, with the same settings and --steps.
    void resume_from_checkpoint();
    void open_trace(const std::string& path);
    void attach(const std::string& listen);  // [HOST:]PORT
    void detach();
    void update();  // once per frame
    // Shows a store that is already loaded (benchmarks, tests).
    void adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label);

    Source source() const { return m_source; }
    const prof::TraceStore* store() const;
    bool running() const;   // a launched run that has not finished
    bool loading() const { return m_loading.valid(); }
    const app::LiveRun* live() const { return m_live.get(); }
    const std::string& source_label() const { return m_source_label; }

    // ---- derived (refreshed when the store changes, at most a few times per second)
    const prof::Report& report() const { return m_report; }
    const std::vector<TrainingPoint>& training() const { return m_training; }
    const std::vector<prof::MemorySample>& memory_timeline(int rank);
    const std::vector<prof::ProcessSample>& process_timeline(int rank);
    // The rank's idle gaps of at least about min_ns (thresholds are bucketed to powers of two, so zooming
    // recomputes rarely), time-ordered. Scanning a lane every frame would cost milliseconds on big traces.
    const std::vector<Gap>& idle_gaps(int rank, int64_t min_ns);
    uint64_t data_version() const { return m_data_version; }
    // The pipeline's schedule diagrams (stages == 0 without a pipeline): the theory for the run's settings, and
    // the measured step (the last one every stage has finished when
    // `step` is 0 or still running). Cached per data version.
    const PipelineDiagram& theory_diagram();
    const PipelineDiagram& measured_diagram(int step);

    // ---- view state shared by the time-based views
    int64_t view_t0 = 0, view_t1 = 1;
    bool follow = true;  // live: keep the latest steps in view
    int selected_rank = 0;
    void fit_all();
    void fit_step(int step);      // the step's window on the slowest rank
    int step_at(int64_t t) const;  // the step running at time t (0 if none)
    void zoom(double factor, int64_t around);
    void pan(int64_t dt);

    // ---- launch settings and runs kept for comparison
    LaunchSettings settings;
    LaunchSettings launched_settings;
    bool auto_relaunch = false;
    std::vector<RunSummary> runs;

    // ---- messages: a log, and a banner for errors the user must see
    std::deque<std::string> log;
    std::string error;
    void message(const std::string& text);
    void fail(const std::string& text);

    // ---- regions of the views in the window (for screenshot checks)
    std::map<std::string, ViewRegion> regions;
    const GuiOptions& options() const { return m_options; }
    int exit_code() const;  // for --exit-when-done: the run's result

private:
    // Starts a background build of the derived data when the store changed (at most four times a second) and
    // installs a finished one; `force`: builds it now, on this thread (a run ended, a trace opened).
    void refresh_derived(bool force);
    void install(DerivedData&& d);
    void archive_run();

    GuiOptions m_options;
    Source m_source = Source::none;
    std::string m_source_label;
    std::unique_ptr<app::LiveRun> m_live;
    std::unique_ptr<prof::TraceStore> m_file_store;
    std::future<std::pair<std::unique_ptr<prof::TraceStore>, std::string>> m_loading;
    std::string m_loading_path;
    bool m_archived = false;
    prof::Report m_report;
    std::vector<TrainingPoint> m_training;
    std::map<int, std::vector<prof::MemorySample>> m_memory;    // by rank, from the last derived build
    std::map<int, std::vector<prof::ProcessSample>> m_process;
    DerivedWorker m_worker;  // declared after the stores it reads: destroyed (and waited for) before them
    struct GapCache {
        uint64_t version = UINT64_MAX;
        int64_t min_ns = 0;
        std::vector<Gap> gaps;
    };
    std::map<int, GapCache> m_gaps;
    struct DiagramCache {
        uint64_t version = UINT64_MAX;
        int step = -1;
        PipelineDiagram diagram;
    };
    DiagramCache m_theory, m_measured;
    uint64_t m_seen_version = UINT64_MAX;
    uint64_t m_data_version = 0;
    std::chrono::steady_clock::time_point m_last_refresh{};
    int m_run_counter = 0;
    LaunchSettings m_pending;  // auto-relaunch waits until the settings stop changing
    std::chrono::steady_clock::time_point m_pending_since{};
};

}  // namespace us::gui
