// What the views draw that is derived from the trace store: the report, the training curves, the memory timelines
// (built on a worker thread, derived_worker.h), and the caches the views fill on demand (idle gaps per rank, the
// pipeline diagrams), all keyed to one data version that moves when a new build is installed.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/state/derived_worker.h"
#include "app/gui/model/pipeline_diagram_model.h"
#include "app/gui/model/timeline_model.h"

namespace us::gui {

class DerivedViews {
public:
    // Starts a background build when the store changed (at most four times a second) and installs a finished
    // one; `force`: builds now, on this thread (a run ended, a trace opened). True when a build was installed;
    // `error` gets what a failed build threw.
    bool refresh(const prof::TraceStore& store, bool force, std::string& error);
    // A new source: waits for a running build and forgets everything derived from the old one.
    void reset();
    // The report's options (--microbatches): every later build reads them.
    void set_report_options(const app::ReportOptions& options) { m_report_options = options; }
    // Until a running build (which reads the store) has ended; the store must not change while busy().
    void wait() { m_worker.wait(); }
    bool busy() const { return m_worker.busy(); }

    const prof::Report& report() const { return m_report; }
    const std::vector<TrainingPoint>& training() const { return m_training; }
    const std::vector<prof::MemorySample>& memory_timeline(int rank) const;
    const std::vector<prof::ProcessSample>& process_timeline(int rank) const;
    uint64_t version() const { return m_version; }
    // Once, when a build found flight recorder dumps in the store (a run that hung) that the last one did not: the
    // dumps and their analysis, for the Hang view.
    std::optional<app::RunHang> take_new_hang() { return std::exchange(m_new_hang, std::nullopt); }
    // The rank's idle gaps of at least about min_ns (thresholds are bucketed to powers of two, so zooming
    // recomputes rarely), time-ordered. Scanning a lane every frame would cost milliseconds on big traces.
    const std::vector<Gap>& idle_gaps(const prof::TraceStore& store, int rank, int64_t min_ns);
    // The pipeline's schedule diagrams (stages == 0 without a pipeline): the theory for the run's settings, and
    // the measured step (the last one every stage has finished when `step` is 0 or still running).
    const PipelineDiagram& theory_diagram();
    const PipelineDiagram& measured_diagram(const prof::TraceStore& store, int step);

private:
    void install(DerivedData&& d);

    app::ReportOptions m_report_options;
    prof::Report m_report;
    std::vector<TrainingPoint> m_training;
    std::map<int, std::vector<prof::MemorySample>> m_memory;  // by rank, from the last build
    std::map<int, std::vector<prof::ProcessSample>> m_process;
    uint64_t m_seen_store_version = UINT64_MAX;
    uint64_t m_version = 0;
    std::chrono::steady_clock::time_point m_last_start{};
    struct GapCache {
        uint64_t version = UINT64_MAX;
        int64_t min_ns = 0;
        std::vector<Gap> gaps;
    };
    std::map<int, GapCache> m_gaps;
    std::optional<app::RunHang> m_new_hang;
    size_t m_hang_dumps_seen = 0;  // ranks whose dumps the Hang view was given
    struct DiagramCache {
        uint64_t version = UINT64_MAX;
        int step = -1;
        PipelineDiagram diagram;
    };
    DiagramCache m_theory, m_measured;
    DerivedWorker m_worker;  // last: destroyed (and waited for) first
};

}  // namespace us::gui
