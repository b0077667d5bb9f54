// The Flight Recorder dump reader (flight_reader.h): bytes to plain data (pickle or JSON), plain data to a flat
// FlightDump. Keys are matched while walking each dict once (a dump of 2,000 entries holds some 40,000 pairs), and
// strings, groups, shapes and stacks are interned as they come (FlightDumpBuilder).
#include "profiler/hang/flight_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_map>

#include "common/core/check.h"
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
constexpr std::string_view kKnownVersions[] = {"2.0", "2.1", "2.2", "2.3", "2.4", "2.5",
                                               "2.6", "2.7", "2.8", "2.9", "2.10"};

// Ranks read: 0 to 2^24, past any job (a corrupt 2^31 had the analysis list two billion ranks without a dump).
constexpr int64_t kMaxRanks = int64_t(1) << 24;

class DumpConverter {
public:
    DumpConverter(const PlainData& data, FlightDump& dump)
        : d_(data),
          dump_(dump),
          build_(dump),
          interned_(data.value_count(), kNotYet),
          frame_slot_(data.value_count(), kNotYet) {}

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
                dump_.rank = rank_value(integer(v, "rank"), v, "rank");
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
    int rank_value(int64_t r, ValueId v, std::string_view key) const {
        if (r < 0 || r >= kMaxRanks) bad(key, v, fmt::format("ranks from 0 to {}", kMaxRanks - 1));
        return int(r);
    }
    // An optional time: None where the recorder did not see it.
    int64_t optional_ns(ValueId v, std::string_view key) const {
        // The JSON form writes 0 where the pickle writes None.
        if (d_.kind(v) == PlainKind::none) return -1;
        const int64_t ns = integer(v, key);
        return ns == 0 ? -1 : ns;
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
    static constexpr std::string_view kDigits = "0123456789";
    std::vector<int> read_ranks(ValueId v) const {
        std::vector<int> ranks;
        if (d_.is_container(v)) {
            for (ValueId r : d_.items(v)) ranks.push_back(rank_value(integer(r, "ranks"), r, "ranks"));
            return ranks;
        }
        const std::string_view s = text(v, "ranks");
        for (size_t i = s.find_first_of(kDigits); i != s.npos; i = s.find_first_of(kDigits, i)) {
            int64_t r = 0;
            const auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), r);
            if (ec != std::errc{}) bad("ranks", v, "a list of ranks");
            ranks.push_back(rank_value(r, v, "ranks"));
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
        ValueId shape_values[4] = {plain::no_value, plain::no_value, plain::no_value, plain::no_value};
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
                        shape_values[0] = x;
                    else if (key == "input_dtypes")
                        shape_values[2] = x;
                    else if (key == "is_p2p")
                        e.is_p2p = boolean(x, key);
                    break;
                case 'o':
                    if (key == "output_sizes")
                        shape_values[1] = x;
                    else if (key == "output_dtypes")
                        shape_values[3] = x;
                    else if (key == "op_id")
                        e.op_id = integer(x, key);
                    break;
                case 'p':
                    if (key == "profiling_name")
                        e.op = intern(x, key);
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
        e.shapes = read_shapes(shape_values);
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

    // An entry's shapes, looked up by their text (most entries repeat a few shapes): built only when new.
    uint32_t read_shapes(const ValueId (&v)[4]) {
        static constexpr const char* keys[4] = {"input_sizes", "output_sizes", "input_dtypes", "output_dtypes"};
        shape_key_.clear();
        for (int k = 0; k < 4; ++k) {
            if (v[k] == plain::no_value) {
                shape_key_ += '-';
                continue;
            }
            if (!d_.is_container(v[k])) bad(keys[k], v[k], "a list");
            for (ValueId t : d_.items(v[k])) {
                if (k >= 2) {
                    const flight::StringId id = intern(t, keys[k]);
                    shape_key_.append(reinterpret_cast<const char*>(&id), sizeof id);
                    continue;
                }
                if (!d_.is_container(t)) bad(keys[k], t, "a list of sizes per tensor");
                shape_key_ += '[';
                for (ValueId n : d_.items(t)) {
                    const int64_t dim = integer(n, keys[k]);
                    shape_key_.append(reinterpret_cast<const char*>(&dim), sizeof dim);
                }
                shape_key_ += ']';
            }
            shape_key_ += '|';
        }
        if (const auto it = shape_index_.find(shape_key_); it != shape_index_.end()) return it->second;
        flight::TensorShapes shapes;
        if (v[0] != plain::no_value) shapes.input_sizes = read_sizes(v[0], keys[0]);
        if (v[1] != plain::no_value) shapes.output_sizes = read_sizes(v[1], keys[1]);
        if (v[2] != plain::no_value) shapes.input_dtypes = read_strings(v[2], keys[2]);
        if (v[3] != plain::no_value) shapes.output_dtypes = read_strings(v[3], keys[3]);
        const uint32_t index = build_.shapes(std::move(shapes));
        shape_index_.emplace(shape_key_, index);
        return index;
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
        for (ValueId s : d_.items(x)) ids.push_back(intern(s, key));
        return ids;
    }
    uint32_t read_frames(ValueId x) {
        if (d_.kind(x) == PlainKind::none) return 0;
        if (!d_.is_container(x)) bad("frames", x, "a list of frames");
        frames_.clear();
        for (ValueId f : d_.items(x)) {
            // A frame the pickle shares (its memo: PyTorch writes each distinct frame once) is read once.
            if (frame_slot_[f] != kNotYet) {
                frames_.push_back(frame_pool_[frame_slot_[f]]);
                continue;
            }
            if (d_.kind(f) != PlainKind::dict) bad("frames", f, "a dict per frame");
            flight::Frame frame;
            const auto kv = d_.items(f);
            for (size_t i = 0; i + 1 < kv.size(); i += 2) {
                std::string_view key;
                if (!d_.get_string(kv[i], key)) continue;
                if (key == "name")
                    frame.name = intern(kv[i + 1], key);
                else if (key == "filename")
                    frame.file = intern(kv[i + 1], key);
                else if (key == "line")
                    frame.line = int32_t(integer(kv[i + 1], key));
            }
            frame_slot_[f] = uint32_t(frame_pool_.size());
            frame_pool_.push_back(frame);
            frames_.push_back(frame);
        }
        return build_.stack(frames_);
    }

    // A string value interned once: a pickle writes a repeated string once and refers to it (its memo), so the
    // same value id comes back for every repeat and is looked up here, not hashed again.
    flight::StringId intern(ValueId v, std::string_view key) {
        if (interned_[v] == kNotYet) interned_[v] = build_.string(text(v, key));
        return interned_[v];
    }

    static constexpr flight::StringId kNotYet = UINT32_MAX;
    const PlainData& d_;
    FlightDump& dump_;
    FlightDumpBuilder build_;
    std::vector<flight::StringId> interned_;  // by value id
    std::vector<flight::Frame> frames_;       // scratch: one entry's frames
    std::vector<uint32_t> frame_slot_;        // by value id: the frame read from it, in frame_pool_
    std::vector<flight::Frame> frame_pool_;
    std::string shape_key_;  // scratch: one entry's shapes as text
    std::unordered_map<std::string, uint32_t> shape_index_;
    std::string where_;  // the entry being read, for messages
};

}  // namespace

bool known_dump_version(std::string_view version) {
    return std::ranges::find(kKnownVersions, version) != std::end(kKnownVersions);
}

const char* known_dump_versions_text() { return "2.0 to 2.10"; }

FlightDump read_flight_dump(std::string_view bytes, const std::string& source) {
    FlightDump dump;
    dump.source = source;
    size_t first = 0;
    while (first < bytes.size() && std::strchr(" \t\r\n", bytes[first])) ++first;
    US_CHECK_INPUT(first < bytes.size(), "{}: the file is empty, where a Flight Recorder dump was expected", source);
    // One arena per thread, kept from one dump to the next: thousands of dumps read on a few threads allocate
    // (and fault in) their room once.
    thread_local PlainData reused;
    PlainData data;
    if (plain::looks_like_pickle(bytes))
        data = plain::read_pickle(bytes, source, std::move(reused));
    else if (bytes[first] == '{')
        data = plain::read_plain_json(bytes, source);
    else
        throw UserError(
            fmt::format("{}: not a Flight Recorder dump: neither a pickle nor JSON (its first byte is "
                        "0x{:02x})",
                        source, uint8_t(bytes[0])));
    DumpConverter(data, dump).top_level(data.root);
    reused = std::move(data);
    return dump;
}

}  // namespace us::hang
