// The Flight Recorder dump writer (flight_writer.h): the same dict PyTorch's recorder pickles, key for key.
#include "profiler/flight/flight_writer.h"

#include <cstdio>
#include <string_view>
#include <map>
#include <tuple>

#include "profiler/plain/pickle_writer.h"

namespace us::flight {
namespace {

using plain::PickleWriter;

void key_string(PickleWriter& w, std::string_view key, std::string_view value) {
    w.string(key);
    w.string(value);
}
void key_int(PickleWriter& w, std::string_view key, int64_t value) {
    w.string(key);
    w.integer(value);
}
void key_optional_ns(PickleWriter& w, std::string_view key, int64_t ns) {
    w.string(key);
    if (ns < 0)
        w.none();
    else
        w.integer(ns);
}

void write_sizes(PickleWriter& w, const std::vector<std::vector<int64_t>>& sizes) {
    w.begin_list();
    for (const auto& tensor : sizes) {
        w.begin_list();
        for (int64_t d : tensor) w.integer(d);
        w.end_list();
    }
    w.end_list();
}

void write_dtypes(PickleWriter& w, const FlightDump& d, const std::vector<StringId>& dtypes) {
    w.begin_list();
    for (StringId id : dtypes) w.string(d.text(id));
    w.end_list();
}

// PyTorch writes a group's ranks as the text of a list ("[0, 1, 2, 3]").
std::string ranks_text(const std::vector<int>& ranks) {
    std::string s = "[";
    for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s + "]";
}

// Each distinct frame is written once and referred to after (PyTorch's dumps share their frame dicts the same
// way, through the pickle's memo): a 2,000-entry dump repeats a few stacks.
class FrameMemo {
public:
    void write(PickleWriter& w, const FlightDump& d, uint32_t stack) {
        w.begin_list();
        for (const Frame& f : d.stacks[stack]) {
            const auto [it, added] = memo_.try_emplace({f.name, f.file, f.line}, 0);
            if (!added) {
                w.get(it->second);
                continue;
            }
            w.begin_dict();
            key_string(w, "name", d.text(f.name));
            key_string(w, "filename", d.text(f.file));
            key_int(w, "line", f.line);
            w.end_dict();
            it->second = w.memoize();
        }
        w.end_list();
    }

private:
    std::map<std::tuple<StringId, StringId, int32_t>, uint32_t> memo_;
};

void write_entry(PickleWriter& w, const FlightDump& d, const FlightEntry& e, FrameMemo& frames) {
    w.begin_dict();
    key_int(w, "record_id", e.record_id);
    key_int(w, "pg_id", e.group);
    w.string("process_group");
    w.begin_tuple();
    w.string(d.group_name(e.group));
    w.string(d.group_desc(e.group));
    w.end_tuple();
    key_int(w, "collective_seq_id", e.collective_seq_id);
    key_int(w, "p2p_seq_id", e.p2p_seq_id);
    key_int(w, "op_id", e.op_id);
    key_string(w, "profiling_name", d.op_name(e));
    key_int(w, "time_created_ns", e.time_created_ns);
    if (e.duration_ms >= 0) {
        w.string("duration_ms");
        w.floating(e.duration_ms);
    }
    const TensorShapes& s = d.shapes[e.shapes];
    w.string("input_sizes");
    write_sizes(w, s.input_sizes);
    w.string("input_dtypes");
    write_dtypes(w, d, s.input_dtypes);
    w.string("output_sizes");
    write_sizes(w, s.output_sizes);
    w.string("output_dtypes");
    write_dtypes(w, d, s.output_dtypes);
    key_string(w, "state", entry_state_name(e.state));
    key_optional_ns(w, "time_discovered_started_ns", e.time_started_ns);
    key_optional_ns(w, "time_discovered_completed_ns", e.time_completed_ns);
    w.string("retired");
    w.boolean(e.retired);
    key_int(w, "timeout_ms", e.timeout_ms);
    w.string("is_p2p");
    w.boolean(e.is_p2p);
    w.string("frames");
    frames.write(w, d, e.stack);
    w.end_dict();
}

}  // namespace

std::string write_flight_dump(const FlightDump& d) {
    PickleWriter w;
    w.begin_dict();
    key_string(w, "version", kWrittenVersion);
    w.string("pg_config");
    w.begin_dict();
    for (const GroupConfig& g : d.pg_config) {
        w.string(g.name);
        w.begin_dict();
        key_string(w, "name", g.name);
        key_string(w, "desc", g.desc);
        key_string(w, "ranks", ranks_text(g.ranks));
        w.end_dict();
    }
    w.end_dict();
    w.string("pg_status");
    w.begin_dict();
    w.end_dict();
    key_string(w, "comm_lib_version", d.comm_lib_version);
    key_int(w, "rank", d.rank);
    key_string(w, "host", d.host);
    key_int(w, "pid", d.pid);
    if (!d.injected_fault.empty()) {
        w.string("ultrascope");
        w.begin_dict();
        key_string(w, "injected_fault", d.injected_fault);
        w.end_dict();
    }
    w.string("entries");
    w.begin_list();
    FrameMemo frames;
    for (const FlightEntry& e : d.entries) write_entry(w, d, e, frames);
    w.end_list();
    w.end_dict();
    return w.finish();
}

bool save_flight_dump(const FlightDump& dump, const std::string& path) {
    const std::string bytes = write_flight_dump(dump);
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return false;
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    const bool closed = std::fclose(f) == 0;
    if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

}  // namespace us::flight
