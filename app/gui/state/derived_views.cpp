#include "app/gui/state/derived_views.h"

#include <algorithm>

namespace us::gui {

bool DerivedViews::refresh(const prof::TraceStore& store, bool force, std::string& error) {
    if (force) {
        m_worker.wait();
        install(build_derived(store, m_report_options));
        return true;
    }
    if (m_worker.busy()) {
        try {
            if (auto d = m_worker.take()) {
                install(std::move(*d));
                return true;
            }
        } catch (const std::exception& e) {
            error = std::string("cannot analyse the trace: ") + e.what();
        }
        return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (store.version() == m_seen_store_version || now - m_last_start < std::chrono::milliseconds(250)) return false;
    m_last_start = now;
    m_worker.start(store, m_report_options);
    return false;
}

void DerivedViews::reset() {
    m_worker.wait();
    m_seen_store_version = UINT64_MAX;
    m_report = prof::Report{};
    m_training.clear();
    m_memory.clear();
    m_process.clear();
    m_new_hang.reset();
    m_hang_dumps_seen = 0;
    ++m_version;
}

void DerivedViews::install(DerivedData&& d) {
    m_seen_store_version = d.store_version;
    ++m_version;
    m_report = std::move(d.report);
    m_training = std::move(d.training);
    m_memory = std::move(d.memory);
    m_process = std::move(d.process);
    // Each build of a hung run's store finds its dumps again: only more of them than were shown are news.
    if (d.hang && d.hang->dumps.dumps.size() > m_hang_dumps_seen) {
        m_hang_dumps_seen = d.hang->dumps.dumps.size();
        m_new_hang = std::move(d.hang);
    }
}

const std::vector<prof::MemorySample>& DerivedViews::memory_timeline(int rank) const {
    static const std::vector<prof::MemorySample> empty;
    auto it = m_memory.find(rank);
    return it == m_memory.end() ? empty : it->second;
}

const std::vector<prof::ProcessSample>& DerivedViews::process_timeline(int rank) const {
    static const std::vector<prof::ProcessSample> empty;
    auto it = m_process.find(rank);
    return it == m_process.end() ? empty : it->second;
}

const PipelineDiagram& DerivedViews::theory_diagram() {
    if (m_theory.version != m_version) {
        m_theory.version = m_version;
        m_theory.diagram = gui::theory_diagram(m_report.predict_input);
    }
    return m_theory.diagram;
}

const PipelineDiagram& DerivedViews::measured_diagram(const prof::TraceStore& store, int step) {
    // Steps finish in order, so the last step every stage of replica 0 has finished bounds the ones to show.
    int complete = INT32_MAX;
    for (const auto& r : m_report.ranks)
        if (r.coords.dp.value_or(0) == 0) complete = std::min(complete, r.steps.empty() ? 0 : r.steps.back().step);
    if (complete == INT32_MAX) complete = 0;
    if (step <= 0 || step > complete) step = complete;
    if (m_measured.version != m_version || m_measured.step != step) {
        m_measured.version = m_version;
        m_measured.step = step;
        m_measured.diagram = step > 0 ? gui::measured_diagram(store, m_report, step) : PipelineDiagram{};
    }
    return m_measured.diagram;
}

const std::vector<Gap>& DerivedViews::idle_gaps(const prof::TraceStore& store, int rank, int64_t min_ns) {
    static const std::vector<Gap> empty;
    if (!store.rank(rank)) return empty;
    int64_t bucket = 1;
    while (bucket * 2 <= min_ns) bucket *= 2;
    GapCache& c = m_gaps[rank];
    if (c.version != m_version || c.min_ns != bucket) {
        const prof::RankTrace& rt = *store.rank(rank);
        const prof::LaneTrack& lane = rt.lanes[size_t(rt.work_lane())];
        c.gaps = gui::idle_gaps(lane, lane.first_begin(), lane.last_end(), bucket);
        c.version = m_version;
        c.min_ns = bucket;
    }
    return c.gaps;
}

}  // namespace us::gui
