#include "app/gui/state/derived_worker.h"

#include <chrono>

#include "app/report/run_report.h"

namespace us::gui {

DerivedData build_derived(const prof::TraceStore& store, const app::ReportOptions& options) {
    DerivedData d;
    d.store_version = store.version();
    app::ReportOptions without_planner = options;
    without_planner.planner = false;
    app::RunReport report = app::make_run_report(app::ReportSource::of_store(store), without_planner);
    d.report = std::move(*report.whole);
    d.hang = std::move(report.hang);
    d.training = build_training_series(store);
    for (int r : store.ranks()) {
        d.memory[r] = prof::memory_timeline(*store.rank(r));
        d.process[r] = prof::process_memory_timeline(store, *store.rank(r));
    }
    return d;
}

void DerivedWorker::start(const prof::TraceStore& store, const app::ReportOptions& options) {
    wait();
    m_build = std::async(std::launch::async, [&store, options] { return build_derived(store, options); });
}

std::optional<DerivedData> DerivedWorker::take() {
    if (!m_build.valid() || m_build.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
    return m_build.get();
}

void DerivedWorker::wait() {
    if (!m_build.valid()) return;
    try {
        m_build.get();
    } catch (...) {  // dropped with its result
    }
}

}  // namespace us::gui
