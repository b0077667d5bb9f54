// The Flight Recorder dump reader (flight_reader.h): bytes to plain data (pickle or JSON), plain data to a flat
// FlightDump. Keys are matched while walking each dict once (a dump of 2,000 entries holds some 40,000 pairs), and
// strings, groups, shapes and stacks are interned as they come (FlightDumpBuilder).
#include "profiler/hang/flight_reader.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstring>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/plain/pickle_reader.h"
#include "profiler/plain/plain_json_reader.h"

namespace us::hang {
namespace {

using flight::FlightDumpBuilder;
using flight::FlightEntry;
using plain::PlainData;
using plain::PlainKind;
using plain::ValueId;

// PyTorch's recorder wrote "2.0" (torch 2.4) through "2.10" (torch 2.15); the keys each added are optional here.
constexpr std::array<std::string_view, 11> kKnownVersions = {"2.0", "2.1", "2.2", "2.3", "2.4", "2.5",
                                                             "2.6", "2.7", "2.8", "2.9", "2.10"};

class DumpConverter {
public:
    DumpConverter(const PlainData& data, FlightDump& dump) : d_(data), dump_(dump), build_(dump) {}

    void top_level(ValueId root) {
        US_CHECK_INPUT(d_.kind(root) == PlainKind::dict,
                       "{}: not a Flight Recorder dump: it holds {}, where a dump is a dict with 'version' and "
                       "'entries'",
                       dump_.source, d_.describe(root));
        ValueId entries = plain::no_value, pg_config = plain::no_value;
        const auto items = d_.items(root);
        for (size_t i = 0; i + 1 < items.size(); i += 2) {
            std::string_view key;
            if (!d_.get_string(items[i], key)) continue;
            const ValueId v = items[i + 1];
            if (key == "version")
                dump_.version = text(v, "version");
            else if (key == "entries")
                entries = v;
            else if (key == "pg_config")
                pg_config = v;
            else if (key == "comm_lib_version" || key == "nccl_version")
                dump_.comm_lib_version = text(v, key);
            else if (key == "rank")
                dump_.rank = int(integer(v, "rank"));
            else if (key == "host" || key == "hostname")
                dump_.host = text(v, key);
            else if (key == "pid")
                dump_.pid = integer(v, "pid");
            else if (key == "ultrascope")
                read_ultrascope(v);
        }
        US_CHECK_INPUT(!dump_.version.empty() || entries != plain::no_value,
                       "{}: not a Flight Recorder dump: the dict has neither 'version' nor 'entries' (is it a "
                       "memory snapshot? `ultrascope report` opens those too)",
                       dump_.source);
        US_CHECK_INPUT(!dump_.version.empty(), "{}: the dump has no 'version': a dump always names its format",
                       dump_.source);
        US_CHECK_INPUT(known_dump_version(dump_.version),
                       "{}: Flight Recorder dump format version '{}' is not one this Ultrascope reads ({}, written by "
                       "torch 2.4 to 2.15): update Ultrascope, or dump with a torch it knows",
                       dump_.source, dump_.version, known_dump_versions_text());
        if (pg_config != plain::no_value) read_pg_config(pg_config);
        if (entries != plain::no_value) read_entries(entries);
    }

private:
    [[noreturn]] void bad(std::string_view key, ValueId v, std::string_view wanted) const {
        throw UserError(fmt::format("{}: '{}' holds {}, where a dump has {}{}", dump_.source, key, d_.describe(v),
                                    wanted, where_.empty() ? "" : " (" + where_ + ")"));
    }
    std::string_view text(ValueId v, std::string_view key) const {
        std::string_view s;
        if (!d_.get_string(v, s)) bad(key, v, "a string");
        return s;
    }
    int64_t integer(ValueId v, std::string_view key) const {
        int64_t i = 0;
        if (!d_.get_int(v, i)) bad(key, v, "an integer");
        return i;
    }
    // An optional time: None where the recorder did not see it.
    int64_t optional_ns(ValueId v, std::string_view key) const {
        return d_.kind(v) == PlainKind::none ? -1 : integer(v, key);
    }
    bool boolean(ValueId v, std::string_view key) const {
        int64_t i = 0;
        if (!d_.get_int(v, i)) bad(key, v, "a boolean");
        return i != 0;
    }

    void read_ultrascope(ValueId v) {
        const ValueId fault = d_.find(v, "injected_fault");
        if (fault != plain::no_value) dump_.injected_fault = text(fault, "injected_fault");
    }

    // pg_config: {name: {"name", "desc", "ranks"}}, the ranks as a list or as the text of one ("[0, 1]").
    void read_pg_config(ValueId v) {
        if (d_.kind(v) != PlainKind::dict) bad("pg_config", v, "a dict of process groups");
        const auto items = d_.items(v);
        for (size_t i = 0; i + 1 < items.size(); i += 2) {
            flight::GroupConfig g;
            g.name = std::string(text(items[i], "pg_config"));
            const ValueId body = items[i + 1];
            if (d_.kind(body) != PlainKind::dict) bad("pg_config", body, "a dict per group");
            if (ValueId desc = d_.find(body, "desc"); desc != plain::no_value) g.desc = text(desc, "desc");
            if (ValueId ranks = d_.find(body, "ranks"); ranks != plain::no_value) g.ranks = read_ranks(ranks);
            dump_.pg_config.push_back(std::move(g));
        }
    }
    std::vector<int> read_ranks(ValueId v) const {
        std::vector<int> ranks;
        if (d_.is_container(v)) {
            for (ValueId r : d_.items(v)) ranks.push_back(int(integer(r, "ranks")));
            return ranks;
        }
        const std::string_view s = text(v, "ranks");
        for (size_t i = 0; i < s.size();) {
            if (s[i] < '0' || s[i] > '9') {
                ++i;
                continue;
            }
            int r = 0;
            const auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), r);
            if (ec != std::errc{}) bad("ranks", v, "a list of ranks");
            ranks.push_back(r);
            i = size_t(end - s.data());
        }
        return ranks;
    }

    void read_entries(ValueId v) {
        if (!d_.is_container(v)) bad("entries", v, "a list of entries");
        const auto items = d_.items(v);
        dump_.entries.reserve(items.size());
        for (size_t i = 0; i < items.size(); ++i) {
            where_ = fmt::format("entry {}", i);
            if (d_.kind(items[i]) != PlainKind::dict) bad("entries", items[i], "a dict per entry");
            dump_.entries.push_back(read_entry(items[i]));
        }
        where_.clear();
    }

    FlightEntry read_entry(ValueId v) {
        FlightEntry e;
        std::string_view group_name, group_desc;
        bool has_collective_seq = false;
        int64_t old_seq = 0;
        flight::TensorShapes shapes;
        const auto items = d_.items(v);
        for (size_t i = 0; i + 1 < items.size(); i += 2) {
            std::string_view key;
            if (!d_.get_string(items[i], key)) continue;
            const ValueId x = items[i + 1];
            switch (key.empty() ? 0 : key[0]) {
                case 'c':
                    if (key == "collective_seq_id") e.collective_seq_id = integer(x, key), has_collective_seq = true;
                    break;
                case 'd':
                    if (key == "duration_ms" && d_.kind(x) != PlainKind::none) {
                        double ms = 0;
                        if (!d_.get_number(x, ms)) bad(key, x, "a number");
                        e.duration_ms = float(ms);
                    }
                    break;
                case 'f':
                    if (key == "frames") e.stack = read_frames(x);
                    break;
                case 'i':
                    if (key == "input_sizes")
                        shapes.input_sizes = read_sizes(x, key);
                    else if (key == "input_dtypes")
                        shapes.input_dtypes = read_strings(x, key);
                    else if (key == "is_p2p")
                        e.is_p2p = boolean(x, key);
                    break;
                case 'o':
                    if (key == "output_sizes")
                        shapes.output_sizes = read_sizes(x, key);
                    else if (key == "output_dtypes")
                        shapes.output_dtypes = read_strings(x, key);
                    else if (key == "op_id")
                        e.op_id = integer(x, key);
                    break;
                case 'p':
                    if (key == "profiling_name")
                        e.op = build_.string(text(x, key));
                    else if (key == "process_group")
                        read_group(x, group_name, group_desc);
                    else if (key == "p2p_seq_id")
                        e.p2p_seq_id = integer(x, key);
                    break;
                case 'r':
                    if (key == "record_id")
                        e.record_id = integer(x, key);
                    else if (key == "retired")
                        e.retired = boolean(x, key);
                    break;
                case 's':
                    if (key == "state") {
                        if (!flight::parse_entry_state(text(x, key), e.state))
                            bad(key, x, "'scheduled', 'started' or 'completed'");
                    } else if (key == "seq_id") {
                        old_seq = integer(x, key);  // before collectives and p2p were counted apart
                    }
                    break;
                case 't':
                    if (key == "time_created_ns")
                        e.time_created_ns = integer(x, key);
                    else if (key == "time_discovered_started_ns")
                        e.time_started_ns = optional_ns(x, key);
                    else if (key == "time_discovered_completed_ns")
                        e.time_completed_ns = optional_ns(x, key);
                    else if (key == "timeout_ms")
                        e.timeout_ms = int32_t(integer(x, key));
                    break;
                default:
                    break;
            }
        }
        if (!has_collective_seq) e.collective_seq_id = old_seq;
        e.group = build_.group(group_name, group_desc);
        e.shapes = build_.shapes(std::move(shapes));
        if (e.is_p2p) {
            int self = -1, peer = -1;
            if (flight::parse_p2p_peers(dump_.text(e.op), self, peer)) e.peer = peer;
        }
        return e;
    }

    // (name, desc) as a tuple or list; older dumps name the group alone.
    void read_group(ValueId x, std::string_view& name, std::string_view& desc) const {
        if (d_.kind(x) == PlainKind::string) {
            name = text(x, "process_group");
            return;
        }
        const auto parts = d_.items(x);
        if (!d_.is_container(x) || parts.empty()) bad("process_group", x, "(name, desc)");
        name = text(parts[0], "process_group");
        if (parts.size() > 1) desc = text(parts[1], "process_group");
    }

    std::vector<std::vector<int64_t>> read_sizes(ValueId x, std::string_view key) const {
        if (!d_.is_container(x)) bad(key, x, "a list of tensor sizes");
        std::vector<std::vector<int64_t>> sizes;
        sizes.reserve(d_.items(x).size());
        for (ValueId t : d_.items(x)) {
            if (!d_.is_container(t)) bad(key, t, "a list of sizes per tensor");
            auto& dims = sizes.emplace_back();
            for (ValueId n : d_.items(t)) dims.push_back(integer(n, key));
        }
        return sizes;
    }
    std::vector<flight::StringId> read_strings(ValueId x, std::string_view key) {
        if (!d_.is_container(x)) bad(key, x, "a list of dtypes");
        std::vector<flight::StringId> ids;
        for (ValueId s : d_.items(x)) ids.push_back(build_.string(text(s, key)));
        return ids;
    }
    uint32_t read_frames(ValueId x) {
        if (d_.kind(x) == PlainKind::none) return 0;
        if (!d_.is_container(x)) bad("frames", x, "a list of frames");
        std::vector<flight::Frame> frames;
        frames.reserve(d_.items(x).size());
        for (ValueId f : d_.items(x)) {
            if (d_.kind(f) != PlainKind::dict) bad("frames", f, "a dict per frame");
            flight::Frame frame;
            const auto kv = d_.items(f);
            for (size_t i = 0; i + 1 < kv.size(); i += 2) {
                std::string_view key;
                if (!d_.get_string(kv[i], key)) continue;
                if (key == "name")
                    frame.name = build_.string(text(kv[i + 1], key));
                else if (key == "filename")
                    frame.file = build_.string(text(kv[i + 1], key));
                else if (key == "line")
                    frame.line = int32_t(integer(kv[i + 1], key));
            }
            frames.push_back(frame);
        }
        return build_.stack(std::move(frames));
    }

    const PlainData& d_;
    FlightDump& dump_;
    FlightDumpBuilder build_;
    std::string where_;  // the entry being read, for messages
};

std::string read_all(const std::string& path, size_t limit) {
    prof::ByteSource source(path);
    std::string bytes;
    char buffer[1 << 16];
    for (size_t n; (n = source.read(buffer, sizeof buffer)) > 0 && bytes.size() < limit;) bytes.append(buffer, n);
    return bytes;
}

}  // namespace

bool known_dump_version(std::string_view version) {
    for (std::string_view v : kKnownVersions)
        if (v == version) return true;
    return false;
}

const char* known_dump_versions_text() { return "2.0 to 2.10"; }

FlightDump read_flight_dump(std::string_view bytes, const std::string& source) {
    FlightDump dump;
    dump.source = source;
    size_t first = 0;
    while (first < bytes.size() && std::strchr(" \t\r\n", bytes[first])) ++first;
    US_CHECK_INPUT(first < bytes.size(), "{}: the file is empty, where a Flight Recorder dump was expected", source);
    PlainData data;
    if (plain::looks_like_pickle(bytes))
        data = plain::read_pickle(bytes, source);
    else if (bytes[first] == '{')
        data = plain::read_plain_json(bytes, source);
    else
        throw UserError(
            fmt::format("{}: not a Flight Recorder dump: neither a pickle nor JSON (its first byte is "
                        "0x{:02x})",
                        source, uint8_t(bytes[0])));
    DumpConverter(data, dump).top_level(data.root);
    return dump;
}

FlightDump load_flight_dump(const std::string& path) { return read_flight_dump(read_all(path, SIZE_MAX), path); }

bool looks_like_flight_dump(const std::string& path) {
    std::string head;
    try {
        head = read_all(path, 4096);
    } catch (const UserError&) {
        return false;
    }
    head.resize(std::min<size_t>(head.size(), 4096));
    const bool pickle = plain::looks_like_pickle(head);
    if (!pickle && head.find('{') == std::string::npos) return false;
    // A dump's dict opens with its version and names its groups' config or its comm library within its first keys.
    const bool names_dump = head.find("pg_config") != std::string::npos ||
                            head.find("comm_lib_version") != std::string::npos ||
                            head.find("nccl_version") != std::string::npos;
    // A memory snapshot names segments; a Kineto trace opens with its schemaVersion and carries the same pg_config
    // and nccl_version inside its distributedInfo.
    return names_dump && head.find("segments") == std::string::npos &&
           head.find("schemaVersion") == std::string::npos && head.find("distributedInfo") == std::string::npos;
}

}  // namespace us::hang
