#include "app/gui/state/data_source.h"

#include <fmt/format.h>

#include <cstdlib>

#include "common/core/check.h"
#include "profiler/import/run_files.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/socket.h"

namespace us::gui {

DataSource::~DataSource() { cancel_load(); }

const prof::TraceStore* DataSource::store() const {
    switch (m_kind) {
        case Source::launched:
        case Source::attached:
            return m_live ? &m_live->store() : nullptr;
        case Source::file:
            return m_file_store.get();
        default:
            return nullptr;
    }
}

std::string DataSource::trace_path() const {
    if (m_live && (m_kind == Source::launched || m_kind == Source::attached)) return m_live->trace_path();
    return m_kind == Source::file ? m_file_path : std::string();
}

bool DataSource::launch(const LaunchSettings& settings, const std::string& label) {
    cancel_load();
    stop();
    app::LiveRunOptions o;
    o.launch.ranks = settings.ranks();
    o.launch.hosts = settings.hosts;
    o.store.max_bytes = m_store_cap_bytes;
    o.train_args = settings.train_args();
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
    cancel_load();
    stop();
    app::LiveRunOptions o;
    o.attach_only = true;
    o.store.max_bytes = m_store_cap_bytes;
    try {
        if (listen.find(':') != std::string::npos) {
            const prof::Endpoint e = prof::parse_endpoint(listen);
            o.launch.hosts.stream_listen = e.host;
            o.listen_port = e.port;
        } else {
            o.listen_port = std::atoi(listen.c_str());
        }
        if (const char* t = std::getenv("ULTRASCOPE_TOKEN"); t && std::string(t).size() == prof::kTokenBytes)
            o.token = t;
        m_live = std::make_unique<app::LiveRun>(o);
    } catch (const UserError& e) {
        m_log.fail(e.what());
        return false;
    }
    m_kind = Source::attached;
    m_label = fmt::format("attached on {}:{}", o.launch.hosts.stream_listen, m_live->port());
    m_log.message(fmt::format("listening on {}:{}; start ranks elsewhere with ULTRASCOPE_TOKEN={} and --connect {}:{}",
                              o.launch.hosts.stream_listen, m_live->port(), m_live->token(),
                              o.launch.hosts.stream_listen, m_live->port()));
    return true;
}

void DataSource::adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label, const std::string& path) {
    if (store.get() != m_load_store) cancel_load();  // another store replaces the one loading
    stop();
    m_live.reset();
    m_file_store = std::move(store);
    m_file_path = path;
    m_kind = Source::file;
    m_label = (m_file_store->is_prediction() ? "predicted (planner model): " : "trace ") + label;
    if (m_load) return;  // said when the load ends
    m_log.message(fmt::format("opened {}: {} spans from {} rank(s)", label, m_file_store->span_count(),
                              m_file_store->ranks().size()));
}

void DataSource::close() {
    cancel_load();
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

void DataSource::open_trace(const std::vector<std::string>& paths, const std::string& label) {
    cancel_load();
    m_load_label.clear();
    for (const auto& p : paths) m_load_label += (m_load_label.empty() ? "" : ", ") + p;
    m_log.message("opening " + (label.empty() ? m_load_label : label + ": " + m_load_label));
    if (!label.empty()) m_load_label = label;
    m_memory.clear();
    m_memory_done.reset();
    m_load = std::make_unique<prof::ProgressiveLoad>(paths, prof::TraceStoreOptions{m_store_cap_bytes});
}

void DataSource::take_memory_events() {
    for (auto& m : m_load->take_memory_events()) m_memory.push_back(std::move(m));
}

void DataSource::cancel_load() {
    if (!m_load) return;
    m_load->cancel();
    const prof::LoadProgress p = m_load->progress();
    if (!p.finished)
        m_log.message(
            fmt::format("stopped opening {}: {} of {} files read", m_load_label, p.files_done, p.files_total));
    m_load.reset();  // joins the workers: each stops at its next read
    m_load_store = nullptr;
}

std::optional<prof::LoadProgress> DataSource::load_progress() const {
    if (!m_load) return std::nullopt;
    return m_load->progress();
}

void DataSource::log_load_messages() {
    for (const auto& w : m_load->take_warnings()) m_log.message("warning: " + w);
    for (const auto& e : m_load->take_errors()) m_log.fail(e);
}

std::unique_ptr<prof::TraceStore> DataSource::take_loaded(std::string& label) {
    if (!m_load || m_load_store) return nullptr;
    auto store = std::make_unique<prof::TraceStore>(prof::TraceStoreOptions{m_store_cap_bytes});
    const bool finished = m_load->finished();  // asked first: what finished is all taken below
    m_load->take_ready(*store);
    take_memory_events();
    // The load's messages wait for pump_load, after the store is adopted (which clears the error banner); a load
    // that ends with nothing to show says why here.
    if (store->rank_count() == 0) {
        if (finished) {
            const bool failed_files = m_load->progress().files_failed > 0;
            log_load_messages();
            if (!failed_files)
                m_log.fail(
                    fmt::format("nothing could be opened from {}: no rank's data in it (a run that ended "
                                "before any rank sent anything)",
                                m_load_label));
            m_load.reset();
        }
        return nullptr;
    }
    label = m_load_label;
    m_load_store = store.get();
    return store;
}

bool DataSource::pump_load() {
    if (!m_load || !m_load_store || m_kind != Source::file || m_file_store.get() != m_load_store) return false;
    const bool finished = m_load->finished();
    m_load->take_ready(*m_file_store);
    take_memory_events();
    log_load_messages();
    if (!finished) return false;
    m_memory_done = std::make_shared<const std::vector<prof::KinetoMemoryEvents>>(std::move(m_memory));
    m_memory.clear();
    const prof::LoadProgress p = m_load->progress();
    m_log.message(fmt::format("opened {}: {} spans from {} rank(s) in {:.1f} s{}", m_load_label,
                              m_file_store->span_count(), m_file_store->ranks().size(), p.seconds,
                              p.files_failed ? fmt::format("; {} of {} files could not be read (see above): the "
                                                           "views show the ranks that were",
                                                           p.files_failed, p.files_total)
                                             : std::string()));
    m_load.reset();
    m_load_store = nullptr;
    return true;
}

bool DataSource::pump() {
    if (!m_live) return false;
    const bool changed = m_live->pump();
    for (auto& m : m_live->take_messages()) m_log.message(m);
    return changed;
}

}  // namespace us::gui
