// Reading an imported run's memory categories on a worker (memory_categories.h).
#include "app/gui/state/memory_categories.h"

#include <algorithm>
#include <filesystem>

#include "common/core/check.h"
#include "profiler/trace/run_info.h"

namespace us::gui {

namespace {

// Where the timelines may be: the opened paths (one per line: folders, and files named beside the trace, which
// find_memory_timelines recognizes by their first bytes), and the timelines lying beside an opened trace file.
std::vector<std::string> search_paths(const std::string& opened) {
    namespace fs = std::filesystem;
    std::vector<std::string> out;
    for (size_t at = 0; at < opened.size();) {
        const size_t nl = std::min(opened.find('\n', at), opened.size());
        const std::string path = opened.substr(at, nl - at);
        at = nl + 1;
        std::error_code ec;
        if (path.empty()) continue;
        out.push_back(path);
        if (fs::is_directory(path, ec)) continue;
        const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.is_regular_file() && prof::is_memory_timeline_file(e.path().string(), false))
                out.push_back(e.path().string());
    }
    return out;
}

}  // namespace

const MemoryCategories::Read* MemoryCategories::of(const prof::TraceStore& store, const DataSource& source,
                                                   MessageLog& log) {
    if (m_store != &store || m_version != store.version() || m_memory != source.memory_events().get()) {
        m_pending = {};
        m_loaded = Read{};
        m_ready = false;
        m_store = &store, m_version = store.version(), m_memory = source.memory_events().get();
        const std::vector<std::string> paths = search_paths(source.trace_path());
        const prof::RunInfo run = prof::run_info_of(store);
        // the [memory] events the run's reader kept (none until the whole run is read)
        auto memory = source.memory_events();
        if (!memory) memory = std::make_shared<const std::vector<prof::KinetoMemoryEvents>>();
        if (!run.imported() || (paths.empty() && memory->empty())) return m_ready = true, &m_loaded;
        m_pending = std::async(std::launch::async, [paths, run, memory] {  // files only: the store stays here
            Read l;
            try {
                l.ranks = prof::read_memory_categories(paths, run, *memory);
            } catch (const UserError& e) {
                l.error = e.what();
            }
            return l;
        });
    }
    if (!m_ready && m_pending.valid() && m_pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        m_loaded = m_pending.get();
        m_ready = true;
        prof::place_memory_categories(m_loaded.ranks, store);
        if (!m_loaded.error.empty()) log.fail(m_loaded.error);
    }
    return m_ready ? &m_loaded : nullptr;
}

nlohmann::json MemoryCategories::facts() const {
    if (!m_ready || m_loaded.ranks.empty()) return nullptr;
    return prof::memory_categories_json(m_loaded.ranks);
}

}  // namespace us::gui
