// The memory categories over time of an imported PyTorch run (profiler/import/memory_categories.h): measured by the
// memory profiler (prof.export_memory_timeline's file in the run's folder or beside its trace file), or else
// inferred from the ops around each [memory] event. Found once per store and read on a worker when the memory view
// first asks; what it read also goes into the screenshot's facts. Its view state (a toggle, a scratch row) lives here
// too, beside what it reads.
#pragma once

#include <cstdint>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/gui/state/data_source.h"
#include "app/gui/state/message_log.h"
#include "profiler/import/memory_categories.h"

namespace us::gui {

class MemoryCategories {
public:
    struct Read {
        std::vector<prof::RankMemoryCategories> ranks;
        std::string error;
    };
    // What was read for the run shown (null while it is read): starts reading when the store, its version or the
    // source's memory events changed since the last call. A failure goes to the log once.
    const Read* of(const prof::TraceStore& store, const DataSource& source, MessageLog& log);
    bool loading() const { return m_pending.valid() && !m_ready; }  // a screenshot waits for it
    // What it read, as report --json's "memory_categories" (null before it read anything), for the tests.
    nlohmann::json facts() const;

    bool show_inferred = false;  // with both: the measured categories unless asked
    std::vector<int64_t> pick;   // the plot's row per pixel column, reused frame to frame (the UI thread only)

private:
    const prof::TraceStore* m_store = nullptr;
    uint64_t m_version = UINT64_MAX;
    const void* m_memory = nullptr;  // the memory events it was computed from (they arrive when the run is read)
    std::future<Read> m_pending;
    Read m_loaded;
    bool m_ready = false;
};

}  // namespace us::gui
