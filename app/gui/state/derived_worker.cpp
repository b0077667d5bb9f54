#include "app/gui/state/derived_worker.h"

#include <chrono>

namespace us::gui {

DerivedData build_derived(const prof::TraceStore& store) {
    DerivedData d;
    d.store_version = store.version();
    d.report = prof::build_report(store);
    d.training = build_training_series(store);
    for (int r : store.ranks()) {
        d.memory[r] = prof::memory_timeline(*store.rank(r));
        d.process[r] = prof::process_memory_timeline(store, *store.rank(r));
    }
    return d;
}

void DerivedWorker::start(const prof::TraceStore& store) {
    wait();
    m_build = std::async(std::launch::async, [&store] { return build_derived(store); });
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
