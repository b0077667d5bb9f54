// What the views derive from the trace store (the report, the training curves, every rank's memory timelines),
// built off the frame thread: a report over a long run takes tens of milliseconds, more than a frame.
// While a build runs, the store it reads must not change: the owner (AppState) stops feeding the store until the
// result is taken (the listener keeps what arrives meanwhile), and waits for the build before it replaces or
// destroys the store. Views keep reading the store on the frame thread: concurrent reads are safe (the store has
// no lazy state).
#pragma once

#include <future>
#include <map>
#include <optional>
#include <vector>

#include "app/gui/model/training_model.h"
#include "app/report/report_options.h"
#include "app/report/run_hang.h"
#include "profiler/analysis/memory_analysis.h"
#include "profiler/analysis/report.h"

namespace us::gui {

struct DerivedData {
    uint64_t store_version = 0;  // the store's version it was built from
    prof::Report report;
    std::vector<TrainingPoint> training;
    std::map<int, std::vector<prof::MemorySample>> memory;    // by rank
    std::map<int, std::vector<prof::ProcessSample>> process;  // by rank
    std::optional<app::RunHang> hang;                         // the run hung: its ranks' dumps, analysed
};

// The report is the one `ultrascope report` builds (app/report/run_report.h), without the planner's comparison
// (the Planner view has its own).
DerivedData build_derived(const prof::TraceStore& store, const app::ReportOptions& options);

class DerivedWorker {
public:
    ~DerivedWorker() { wait(); }
    // Starts a build over `store` (which must stay unchanged and alive until take() returns it or wait() ends).
    void start(const prof::TraceStore& store, const app::ReportOptions& options);
    bool busy() const { return m_build.valid(); }
    // The finished build, if it has finished (then the worker is idle again); rethrows what the build threw.
    std::optional<DerivedData> take();
    // Until the running build, if any, has ended; its result is dropped.
    void wait();

private:
    std::future<DerivedData> m_build;
};

}  // namespace us::gui
