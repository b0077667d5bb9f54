// The rank metadata's (de)serializer (rank_metadata.h): the one place its keys are spelled.
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

namespace {

template <typename T>
void read(const nlohmann::json& j, const char* key, T& out) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        try {
            out = it->get<T>();
        } catch (const nlohmann::json::exception&) {  // a wrong type: the field stays unknown
        }
    }
}

template <typename T>
void read(const nlohmann::json& j, const char* key, std::optional<T>& out) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        try {
            out = it->get<T>();
        } catch (const nlohmann::json::exception&) {
        }
    }
}

nlohmann::json hta_rows_json(const std::vector<HtaStreamRow>& rows) {
    nlohmann::json out = nlohmann::json::array();
    for (const HtaStreamRow& r : rows)
        out.push_back({r.begin, r.end, r.stream, r.name, r.launch ? nlohmann::json(*r.launch) : nlohmann::json(),
                       r.correlated ? 1 : 0});
    return out;
}

// Rows that do not read (too short, no integer times) are left out, as HTA's figures always left them.
std::vector<HtaStreamRow> hta_rows_from_json(const nlohmann::json& j) {
    std::vector<HtaStreamRow> out;
    for (const auto& row : j) {
        if (!row.is_array() || row.size() < 6 || !row[0].is_number_integer() || !row[1].is_number_integer()) continue;
        HtaStreamRow r;
        r.begin = row[0].get<int64_t>(), r.end = row[1].get<int64_t>();
        if (row[2].is_number_integer()) r.stream = row[2].get<int64_t>();
        if (row[3].is_string()) r.name = row[3].get<std::string>();
        if (row[4].is_number_integer()) r.launch = row[4].get<int64_t>();
        r.correlated = row[5] == 1;
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace

nlohmann::json to_json(const RankMetadata& m) {
    nlohmann::json j = {{"format", RankMetadata::kFormat},
                        {"rank", m.rank},
                        {"world_size", m.world_size},
                        {"coords", grid_json(m.coords)},
                        {"grid", grid_json(m.grid)},
                        {"host", m.host},
                        {"device", m.device},
                        {"backend", m.backend},
                        {"device_peak_gflops", m.device_peak_gflops},
                        {"device_peak_source", m.device_peak_source},
                        {"tokens_per_step", m.tokens_per_step},
                        {"params", m.params}};
    if (m.pid) j["pid"] = *m.pid;
    if (m.threads) j["threads"] = *m.threads;
    if (m.machine) j["machine"] = *m.machine;
    if (m.cpus) j["cpus"] = *m.cpus;
    if (m.settings) j["config"] = *m.settings;
    if (m.blas_kernel) j["blas_kernel"] = *m.blas_kernel;
    if (m.comm_backend) j["comm_backend"] = *m.comm_backend;
    if (m.attention_kernels) j["attention_kernels"] = *m.attention_kernels;
    if (m.injected_slow_factor) j["injected_slow_factor"] = *m.injected_slow_factor;
    if (m.injected_slow_kind) j["injected_slow_kind"] = *m.injected_slow_kind;
    if (m.injected_hang) j["injected_hang"] = *m.injected_hang;
    if (m.clock)
        j["clock"] = {{"source", m.clock->source},
                      {"offset_ns", m.clock->offset_ns},
                      {"uncertainty_ns", m.clock->uncertainty_ns},
                      {"method", m.clock->method},
                      {"estimated_at_step", m.clock->estimated_at_step}};
    if (m.started_unix_ms) j["started_unix_ms"] = *m.started_unix_ms;
    if (m.cupti) j["cupti"] = *m.cupti;
    if (!m.device_memory_parts.empty()) {
        nlohmann::json parts = nlohmann::json::array();
        for (const DeviceMemoryPart& p : m.device_memory_parts)
            parts.push_back(nlohmann::json::array({p.name, p.bytes}));
        j["device_memory_parts"] = parts;
    }
    if (m.predicted) j["predicted"] = *m.predicted;
    if (!m.source.empty()) j["source"] = m.source;
    if (m.file) j["file"] = *m.file;
    if (m.rank_from) j["rank_from"] = *m.rank_from;
    if (!m.versions.empty()) j["versions"] = m.versions;
    if (m.run) j["run"] = *m.run;
    if (m.microbatches) j["microbatches"] = *m.microbatches;
    if (!m.hta_stream_rows.empty()) j["hta_stream_rows"] = hta_rows_json(m.hta_stream_rows);
    if (!m.stream_ids.empty()) j["streams"] = m.stream_ids;
    if (!m.thread_ids.empty() && !m.threads) j["threads"] = m.thread_ids;
    return j;
}

RankMetadata rank_metadata_from_json(const nlohmann::json& j) {
    RankMetadata m;
    if (!j.is_object()) return m;
    read(j, "rank", m.rank);
    // An integer, or unknown (0): the store then counts the ranks it holds.
    const auto world = j.find("world_size");
    m.world_size = world != j.end() && world->is_number_integer() ? world->get<int>() : 0;
    if (auto it = j.find("coords"); it != j.end()) m.coords = grid_from_json<GridCoords>(*it);
    if (auto it = j.find("grid"); it != j.end()) m.grid = grid_from_json<GridSizes>(*it);
    if (auto it = j.find("microbatches"); it != j.end() && it->is_number_integer()) m.microbatches = it->get<int>();
    read(j, "host", m.host);
    read(j, "pid", m.pid);
    read(j, "device", m.device);
    read(j, "backend", m.backend);
    read(j, "threads", m.threads);
    read(j, "machine", m.machine);
    read(j, "cpus", m.cpus);
    if (auto it = j.find("config"); it != j.end() && it->is_object()) m.settings = *it;
    read(j, "device_peak_gflops", m.device_peak_gflops);
    read(j, "device_peak_source", m.device_peak_source);
    read(j, "blas_kernel", m.blas_kernel);
    read(j, "comm_backend", m.comm_backend);
    read(j, "attention_kernels", m.attention_kernels);
    read(j, "injected_slow_factor", m.injected_slow_factor);
    read(j, "injected_slow_kind", m.injected_slow_kind);
    read(j, "injected_hang", m.injected_hang);
    read(j, "tokens_per_step", m.tokens_per_step);
    read(j, "params", m.params);
    if (auto it = j.find("clock"); it != j.end() && it->is_object()) {
        ClockEstimate c;
        read(*it, "source", c.source);
        read(*it, "offset_ns", c.offset_ns);
        read(*it, "uncertainty_ns", c.uncertainty_ns);
        read(*it, "method", c.method);
        read(*it, "estimated_at_step", c.estimated_at_step);
        m.clock = c;
    }
    read(j, "started_unix_ms", m.started_unix_ms);
    if (auto it = j.find("cupti"); it != j.end() && it->is_object()) m.cupti = *it;
    if (auto it = j.find("device_memory_parts"); it != j.end() && it->is_array())
        for (const nlohmann::json& p : *it)
            if (p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_number_integer())
                m.device_memory_parts.push_back({p[0].get<std::string>(), p[1].get<int64_t>()});
    if (auto it = j.find("predicted"); it != j.end() && it->is_object()) m.predicted = *it;
    read(j, "source", m.source);
    read(j, "file", m.file);
    read(j, "rank_from", m.rank_from);
    if (auto it = j.find("versions"); it != j.end() && it->is_object()) m.versions = *it;
    if (auto it = j.find("run"); it != j.end() && it->is_object()) m.run = *it;
    if (auto it = j.find("streams"); it != j.end() && it->is_array()) m.stream_ids = *it;
    if (auto it = j.find("threads"); it != j.end() && it->is_array()) m.thread_ids = *it;
    if (auto it = j.find("hta_stream_rows"); it != j.end() && it->is_array())
        m.hta_stream_rows = hta_rows_from_json(*it);
    return m;
}

}  // namespace us::prof
