#include "app/gui/data_source.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/core/check.h"
#include "profiler/import/run_files.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/socket.h"

namespace us::gui {

DataSource::~DataSource() {
    if (m_loading.valid()) m_loading.wait();
}

const prof::TraceStore* DataSource::store() const {
    switch (m_kind) {
        case Source::launched:
        case Source::attached: return m_live ? &m_live->store() : nullptr;
        case Source::file: return m_file_store.get();
        default: return nullptr;
    }
}

std::string DataSource::trace_path() const {
    if (m_live && (m_kind == Source::launched || m_kind == Source::attached)) return m_live->trace_path();
    return m_kind == Source::file ? m_file_path : std::string();
}

bool DataSource::launch(const LaunchSettings& settings, const std::string& label) {
    stop();
    app::LiveRunOptions o;
    o.launch.ranks = settings.ranks();
    o.store.max_bytes = m_store_cap_bytes;
    o.launch.launcher = settings.hosts.launcher;
    o.launch.hostfile = settings.hosts.hostfile;
    o.listen_host = settings.hosts.stream_listen;
    o.launch.train_args = settings.train_args();
    try {
        m_live = std::make_unique<app::LiveRun>(o);
    } catch (const UserError& e) {
        m_log.fail(e.what());
        close();
        return false;
    }
    m_kind = Source::launched;
    m_label = label;
    m_log.message(fmt::format("launched {}; trace {}", m_label, m_live->trace_path()));
    return true;
}

bool DataSource::attach(const std::string& listen) {
    stop();
    app::LiveRunOptions o;
    o.attach_only = true;
    o.store.max_bytes = m_store_cap_bytes;
    try {
        if (listen.find(':') != std::string::npos) {
            const prof::Endpoint e = prof::parse_endpoint(listen);
            o.listen_host = e.host;
            o.listen_port = e.port;
        } else {
            o.listen_port = std::atoi(listen.c_str());
        }
        if (const char* t = std::getenv("ULTRASCOPE_TOKEN"); t && std::string(t).size() == prof::kTokenBytes) o.token = t;
        m_live = std::make_unique<app::LiveRun>(o);
    } catch (const UserError& e) {
        m_log.fail(e.what());
        return false;
    }
    m_kind = Source::attached;
    m_label = fmt::format("attached on {}:{}", o.listen_host, m_live->port());
    m_log.message(fmt::format("listening on {}:{}; start ranks elsewhere with ULTRASCOPE_TOKEN={} and --connect {}:{}",
                              o.listen_host, m_live->port(), m_live->token(), o.listen_host, m_live->port()));
    return true;
}

void DataSource::adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label, const std::string& path) {
    stop();
    m_live.reset();
    m_file_store = std::move(store);
    m_file_path = path;
    m_kind = Source::file;
    m_label = (m_file_store->is_prediction() ? "predicted (planner model): " : "trace ") + label;
    m_log.message(fmt::format("opened {}: {} spans from {} rank(s)", label, m_file_store->span_count(),
                              m_file_store->ranks().size()));
}

void DataSource::close() {
    stop();
    m_live.reset();
    m_kind = Source::none;
}

void DataSource::stop() {
    if (m_live && m_kind == Source::launched && !m_live->finished()) {
        m_log.message("stopping " + m_label);
        m_live->stop();
        for (int i = 0; i < 100 && !m_live->finished(); ++i) m_live->pump();
    }
}

void DataSource::open_trace(const std::string& path) {
    if (m_loading.valid()) return;
    m_loading_path = path;
    m_log.message("opening " + path);
    const prof::TraceStoreOptions store_options{m_store_cap_bytes};
    // `path`: an Ultrascope trace, a PyTorch profiler file or folder, or several such paths one per line.
    m_loading = std::async(std::launch::async, [path, store_options]() -> Loaded {
        Loaded out;
        out.store = std::make_unique<prof::TraceStore>(store_options);
        std::vector<std::string> paths;
        for (size_t at = 0; at <= path.size();) {
            const size_t nl = std::min(path.find('\n', at), path.size());
            if (nl > at) paths.push_back(path.substr(at, nl - at));
            at = nl + 1;
        }
        try {
            out.warnings = prof::load_run(paths, *out.store);
        } catch (const UserError& e) {
            return {nullptr, e.what(), {}};
        } catch (const std::exception& e) {
            return {nullptr, std::string("cannot read the trace: ") + e.what(), {}};
        }
        return out;
    });
}

std::unique_ptr<prof::TraceStore> DataSource::take_loaded(std::string& path) {
    if (!m_loading.valid() || m_loading.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
    Loaded loaded = m_loading.get();
    if (!loaded.store) m_log.fail(loaded.error);
    for (const auto& w : loaded.warnings) m_log.message("warning: " + w);
    path = m_loading_path;
    return std::move(loaded.store);
}

bool DataSource::pump() {
    if (!m_live) return false;
    const bool changed = m_live->pump();
    for (auto& m : m_live->take_messages()) m_log.message(m);
    return changed;
}

}  // namespace us::gui
