// The Attach window's capture on a worker thread (capture_worker.h).
#include "app/gui/state/capture_worker.h"

#include <fmt/core.h>

#include <algorithm>
#include <tuple>
#include <utility>

namespace us::gui {

CaptureWorker::~CaptureWorker() {
    m_cancel = true;
    if (m_thread.joinable()) m_thread.join();
}

void CaptureWorker::start(const app::CaptureOptions& options, prof::OnDemandDaemon* daemon) {
    if (m_running || has_outcome()) return;  // the last outcome is taken first: it would be lost
    if (m_thread.joinable()) m_thread.join();
    m_options = options;
    m_cancel = false;
    m_running = true;
    m_started_at = prof::steady_seconds();
    {
        std::lock_guard lock(m_mutex);
        m_node_lines.clear();
        m_ranks.clear();
        m_retries.clear();
        m_outcome.reset();
    }
    m_thread = std::thread([this, daemon] {
        app::CaptureCallbacks callbacks;
        callbacks.on_event = [this](const app::CaptureEvent& e) { on_event(e); };
        callbacks.cancel = &m_cancel;
        callbacks.daemon = daemon;
        app::CaptureOutcome outcome = app::capture_job(m_options, callbacks);
        std::lock_guard lock(m_mutex);
        m_outcome = std::move(outcome);
        m_running = false;
    });
}

// A rank event comes just before its line: the line is the rank's when it names the rank's pid.
void CaptureWorker::on_event(const app::CaptureEvent& e) {
    std::lock_guard lock(m_mutex);
    switch (e.kind) {
        case app::CaptureEvent::Kind::rank: {
            CaptureRankRow& row = m_ranks[{e.node, e.rank.pid}];
            row.node = e.node, row.rank = e.rank.rank, row.pid = e.rank.pid;
            row.state = e.rank.state, row.requests = e.rank.requests;
            break;
        }
        case app::CaptureEvent::Kind::line: {
            for (auto& [key, row] : m_ranks)
                if (key.first == e.node && (e.text.find(fmt::format("pid {})", row.pid)) != std::string::npos ||
                                            e.text.rfind(fmt::format("pid {}:", row.pid), 0) == 0)) {
                    row.line = e.text;
                    return;
                }
            m_node_lines[e.node] = e.text;
            break;
        }
        case app::CaptureEvent::Kind::retried:
            m_retries.push_back(fmt::format("the ranks captured different steps with roundup {}: again with {}\n{}",
                                            e.roundup, e.roundup * 4, e.text));
            m_ranks.clear();  // the next capture's ranks start over
            break;
    }
}

CaptureProgressView CaptureWorker::progress() const {
    std::lock_guard lock(m_mutex);
    CaptureProgressView view;
    for (const auto& [node, line] : m_node_lines) view.node_lines.push_back(node.empty() ? line : node + ": " + line);
    for (const auto& [key, row] : m_ranks) view.ranks.push_back(row);
    std::sort(view.ranks.begin(), view.ranks.end(), [](const CaptureRankRow& a, const CaptureRankRow& b) {
        return std::tie(a.node, a.rank, a.pid) < std::tie(b.node, b.rank, b.pid);
    });
    view.retries = m_retries;
    view.seconds = m_running ? prof::steady_seconds() - m_started_at : 0;
    return view;
}

bool CaptureWorker::has_outcome() const {
    std::lock_guard lock(m_mutex);
    return m_outcome.has_value();
}

std::optional<app::CaptureOutcome> CaptureWorker::take_outcome() {
    std::lock_guard lock(m_mutex);
    if (m_running) return std::nullopt;
    return std::exchange(m_outcome, std::nullopt);
}

}  // namespace us::gui
