// From plain data (a pickle or JSON) to the typed snapshot (memory_snapshot.h), checking every field's type and
// naming where a field was wrong: "rank0.pickle: device_traces[0][12]: 'size' is the string 'x', not an integer".
#include "profiler/snapshot/memory_snapshot.h"

#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <unordered_map>

#include "common/core/check.h"
#include "profiler/plain/pickle_reader.h"
#include "profiler/plain/plain_json_reader.h"
#include "profiler/trace/run_info.h"

namespace us::snap {
using namespace plain;  // the snapshot is plain data read from a pickle or JSON (profiler/plain/)

const char* trace_action_name(TraceAction action) {
    static const char* names[] = {"alloc",        "free_requested", "free_completed", "segment_alloc",
                                  "segment_free", "segment_map",    "segment_unmap",  "oom",
                                  "snapshot",     "other"};
    return names[size_t(action)];
}

MemorySnapshot::MemorySnapshot() { stacks_.push_back({0, 0}); }

uint32_t MemorySnapshot::add_frame(const SnapshotFrame& f) {
    frames_.push_back(f);
    return uint32_t(frames_.size() - 1);
}

uint32_t MemorySnapshot::add_stack(std::span<const uint32_t> frame_ids) {
    if (frame_ids.empty()) return 0;
    stacks_.push_back({uint32_t(stack_frames_.size()), uint32_t(frame_ids.size())});
    stack_frames_.insert(stack_frames_.end(), frame_ids.begin(), frame_ids.end());
    return uint32_t(stacks_.size() - 1);
}

size_t MemorySnapshot::trace_entries() const {
    size_t n = 0;
    for (const auto& t : device_traces) n += t.size();
    return n;
}

namespace {

TraceAction parse_action(std::string_view a) {
    static const std::pair<std::string_view, TraceAction> table[] = {{"alloc", TraceAction::alloc},
                                                                     {"free_requested", TraceAction::free_requested},
                                                                     {"free_completed", TraceAction::free_completed},
                                                                     {"segment_alloc", TraceAction::segment_alloc},
                                                                     {"segment_free", TraceAction::segment_free},
                                                                     {"segment_map", TraceAction::segment_map},
                                                                     {"segment_unmap", TraceAction::segment_unmap},
                                                                     {"oom", TraceAction::oom},
                                                                     {"snapshot", TraceAction::snapshot}};
    for (const auto& [name, action] : table)
        if (a == name) return action;
    return TraceAction::other;
}

BlockState parse_state(std::string_view s) {
    if (s == "active_allocated") return BlockState::active_allocated;
    // "active_awaiting_free" in torch's docstring; "active_pending_free" in the allocator's C++ names.
    if (s == "active_awaiting_free" || s == "active_pending_free") return BlockState::active_awaiting_free;
    if (s == "inactive") return BlockState::inactive;
    return BlockState::unknown;
}

// Typed reads of one dict, with the place ("segments[3]") for messages.
class Converter {
public:
    Converter(MemorySnapshot& snap) : s_(snap), d_(snap.data), frame_ids_(snap.data.value_count(), no_frame) {}

    void run() {
        ValueId root = d_.root;
        ValueId segments = no_value, traces = no_value;
        // torch.cuda.memory_snapshot() (no trace) is a plain list of segments; _snapshot() a dict.
        if (d_.kind(root) == PlainKind::list)
            segments = root;
        else if (d_.kind(root) == PlainKind::dict)
            segments = d_.find(root, "segments"), traces = d_.find(root, "device_traces");
        else
            fail("the file holds {}, not a memory snapshot (a dict with 'segments' and 'device_traces')",
                 d_.describe(root));
        if (segments == no_value) fail("no 'segments' in the dict: not a PyTorch memory snapshot");
        if (d_.kind(segments) != PlainKind::list) fail("'segments' is {}, not a list", d_.describe(segments));
        const auto segs = d_.items(segments);
        for (size_t i = 0; i < segs.size(); ++i) read_segment(segs[i], i);
        if (traces != no_value && d_.kind(traces) != PlainKind::none) {
            if (d_.kind(traces) != PlainKind::list) fail("'device_traces' is {}, not a list", d_.describe(traces));
            s_.has_traces = true;
            const auto devs = d_.items(traces);
            s_.device_traces.resize(devs.size());
            for (size_t dev = 0; dev < devs.size(); ++dev) {
                if (d_.kind(devs[dev]) != PlainKind::list)
                    fail("device_traces[{}] is {}, not a list", dev, d_.describe(devs[dev]));
                const auto entries = d_.items(devs[dev]);
                auto& out = s_.device_traces[dev];
                out.reserve(entries.size());
                for (size_t i = 0; i < entries.size(); ++i) out.push_back(read_entry(entries[i], dev, i));
            }
        }
        if (unknown_actions_ > 0)
            s_.warnings.push_back(
                fmt::format("{} trace entries with an action Ultrascope does not know (left out of "
                            "the replay)",
                            unknown_actions_));
    }

private:
    MemorySnapshot& s_;
    const PlainData& d_;
    static constexpr uint32_t no_frame = UINT32_MAX;
    std::vector<uint32_t> frame_ids_;                       // by the value a frame came from (shared through the memo)
    std::unordered_map<uint64_t, uint32_t> stack_by_hash_;  // stacks by the hash of their frame ids
    std::unordered_map<std::string, uint32_t> frame_by_content_;
    std::string content_key_;
    std::vector<uint32_t> scratch_;
    size_t unknown_actions_ = 0;
    std::string where_;

    template <typename... Args>
    [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
        fail_user("{}: {}{}{}", s_.source, where_, where_.empty() ? "" : ": ",
                  fmt::format(format, std::forward<Args>(args)...));
    }
    ValueId field(ValueId dict, std::string_view key, bool required) const {
        const ValueId v = d_.find(dict, key);
        if (v == no_value && required) fail("no '{}'", key);
        return v;
    }
    int64_t int_field(ValueId dict, std::string_view key, bool required, int64_t fallback = 0) const {
        const ValueId v = field(dict, key, required);
        if (v == no_value || d_.kind(v) == PlainKind::none) return fallback;
        int64_t out = 0;
        double f = 0;
        if (d_.get_int(v, out)) return out;
        // A float (time_us in some versions) counts if it is a number int64 holds: NaN and 1e300 do not.
        if (d_.get_number(v, f) && f >= -9.2e18 && f <= 9.2e18) return int64_t(f);
        fail("'{}' is {}, not an integer", key, d_.describe(v));
    }
    std::string_view string_field(ValueId dict, std::string_view key, bool required) const {
        const ValueId v = field(dict, key, required);
        std::string_view out;
        if (v == no_value) return out;
        if (!d_.get_string(v, out)) fail("'{}' is {}, not a string", key, d_.describe(v));
        return out;
    }
    void expect_dict(ValueId v) const {
        if (d_.kind(v) != PlainKind::dict) fail("{} where a dict was expected", d_.describe(v));
    }

    uint32_t read_stack(ValueId owner) {
        const ValueId frames = d_.find(owner, "frames");
        if (frames == no_value || d_.kind(frames) == PlainKind::none) return 0;
        if (d_.kind(frames) != PlainKind::list && d_.kind(frames) != PlainKind::tuple)
            fail("'frames' is {}, not a list", d_.describe(frames));
        scratch_.clear();
        for (const ValueId f : d_.items(frames)) {
            if (frame_ids_[f] == no_frame) {
                expect_dict(f);
                SnapshotFrame frame{string_field(f, "filename", false), string_field(f, "name", false),
                                    int_field(f, "line", false)};
                // Equal frames that are not one shared value (JSON, or a pickle without memo) become one frame.
                content_key_.assign(frame.filename)
                    .append(1, '\0')
                    .append(frame.name)
                    .append(1, '\0')
                    .append(std::to_string(frame.line));
                auto [c, fresh] = frame_by_content_.try_emplace(content_key_, 0);
                if (fresh) c->second = s_.add_frame(frame);
                frame_ids_[f] = c->second;
            }
            scratch_.push_back(frame_ids_[f]);
        }
        // Equal stacks (every entry of a loop) are stored once.
        uint64_t hash = 1469598103934665603ull;
        for (const uint32_t f : scratch_) hash = (hash ^ f) * 1099511628211ull;
        const auto [it, fresh] = stack_by_hash_.try_emplace(hash, 0);
        if (!fresh) {
            const auto known = s_.stack(it->second);
            if (std::equal(known.begin(), known.end(), scratch_.begin(), scratch_.end())) return it->second;
            return s_.add_stack(scratch_);  // a hash collision: kept apart
        }
        it->second = s_.add_stack(scratch_);
        return it->second;
    }

    void read_segment(ValueId v, size_t i) {
        where_ = fmt::format("segments[{}]", i);
        expect_dict(v);
        SnapshotSegment seg;
        seg.device = int(int_field(v, "device", false));
        seg.address = uint64_t(int_field(v, "address", true));
        seg.total_size = int_field(v, "total_size", true);
        seg.allocated_size = int_field(v, "allocated_size", false);
        seg.active_size = int_field(v, "active_size", false);
        seg.stream = int_field(v, "stream", false);
        seg.segment_type = string_field(v, "segment_type", false);
        if (seg.device < 0 || seg.total_size < 0) fail("a negative device or size");
        seg.block_begin = uint32_t(s_.blocks.size());
        const ValueId blocks = field(v, "blocks", false);
        if (blocks != no_value) {
            if (d_.kind(blocks) != PlainKind::list) fail("'blocks' is {}, not a list", d_.describe(blocks));
            const auto items = d_.items(blocks);
            for (size_t b = 0; b < items.size(); ++b) {
                where_ = fmt::format("segments[{}].blocks[{}]", i, b);
                expect_dict(items[b]);
                SnapshotBlock block;
                block.size = int_field(items[b], "size", true);
                block.requested_size = int_field(items[b], "requested_size", false, block.size);
                block.address = uint64_t(int_field(items[b], "address", false));
                block.state = parse_state(string_field(items[b], "state", false));
                block.stack = read_stack(items[b]);
                if (block.size < 0) fail("a negative size");
                s_.blocks.push_back(block);
            }
        }
        seg.block_count = uint32_t(s_.blocks.size() - seg.block_begin);
        s_.segments.push_back(seg);
        where_.clear();
    }

    TraceEntry read_entry(ValueId v, size_t dev, size_t i) {
        if (d_.kind(v) != PlainKind::dict) {
            where_ = fmt::format("device_traces[{}][{}]", dev, i);
            expect_dict(v);
        }
        TraceEntry e;
        const ValueId action = d_.find(v, "action");
        std::string_view a;
        if (action == no_value || !d_.get_string(action, a)) {
            where_ = fmt::format("device_traces[{}][{}]", dev, i);
            fail("'action' is {}, not a string", d_.describe(action));
        }
        e.action = parse_action(a);
        if (e.action == TraceAction::other) ++unknown_actions_;
        // The common fields, read directly (a million entries): the slow path only names a bad one.
        int64_t x = 0;
        const ValueId addr = d_.find(v, "addr"), size = d_.find(v, "size");
        if (addr != no_value && d_.get_int(addr, x))
            e.addr = uint64_t(x);
        else if (addr != no_value || e.action != TraceAction::oom)
            e.addr = uint64_t(slow_int(v, "addr", dev, i, false));
        if (size != no_value && d_.get_int(size, x))
            e.size = x;
        else
            e.size = slow_int(v, "size", dev, i, e.action != TraceAction::snapshot && e.action != TraceAction::other);
        const ValueId stream = d_.find(v, "stream"), time = d_.find(v, "time_us");
        if (stream != no_value && d_.get_int(stream, x)) e.stream = x;
        if (time != no_value && d_.get_int(time, x))
            e.time_us = x;
        else if (time != no_value)
            e.time_us = slow_int(v, "time_us", dev, i, false, -1);
        if (e.action == TraceAction::oom) e.device_free = slow_int(v, "device_free", dev, i, false, -1);
        if (e.size < 0) {
            where_ = fmt::format("device_traces[{}][{}]", dev, i);
            fail("a negative size ({})", e.size);
        }
        e.stack = read_stack(v);
        return e;
    }
    int64_t slow_int(ValueId v, std::string_view key, size_t dev, size_t i, bool required, int64_t fallback = 0) {
        where_ = fmt::format("device_traces[{}][{}]", dev, i);
        const int64_t out = int_field(v, key, required, fallback);
        where_.clear();
        return out;
    }
};

}  // namespace

namespace {

PlainData read_snapshot_data(std::string_view bytes, const std::string& source) {
    size_t first = 0;
    while (first < bytes.size() && std::isspace(uint8_t(bytes[first]))) ++first;
    if (looks_like_pickle(bytes)) return read_pickle(bytes, source);
    if (first < bytes.size() && (bytes[first] == '{' || bytes[first] == '['))
        return read_plain_json(bytes, source);
    else if (!bytes.empty() && (uint8_t(bytes[0]) == 0x80 || bytes[0] == '(' || bytes[0] == ']' || bytes[0] == '}'))
        fail_user(
            "{}: a pickle of protocol {}: Ultrascope reads protocols 2 to 5 (re-dump with "
            "pickle.dump(snapshot, f, protocol=4))",
            source, uint8_t(bytes[0]) == 0x80 && bytes.size() > 1 ? std::to_string(uint8_t(bytes[1])) : "0 or 1");
    else
        fail_user(
            "{}: neither a pickle (protocol 2-5) nor JSON: not a PyTorch memory snapshot "
            "(torch.cuda.memory._dump_snapshot writes one)",
            source);
}

MemorySnapshot to_snapshot(PlainData&& data, const std::string& source) {
    MemorySnapshot snap;
    snap.source = source;
    snap.data = std::move(data);
    Converter(snap).run();
    return snap;
}

}  // namespace

MemorySnapshot parse_memory_snapshot(std::string_view bytes, const std::string& source) {
    return to_snapshot(read_snapshot_data(bytes, source), source);
}

MemorySnapshot load_memory_snapshot(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    US_CHECK_INPUT(in.good(), "{}: cannot open the memory snapshot (no such file, or not readable)", path);
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    US_CHECK_INPUT(size >= 0, "{}: cannot read its size", path);
    in.seekg(0);
    std::string bytes(size_t(size), '\0');
    in.read(bytes.data(), size);
    US_CHECK_INPUT(in.gcount() == size, "{}: read {} of {} bytes", path, in.gcount(), size);
    PlainData data = read_snapshot_data(bytes, path);
    std::string().swap(bytes);  // the file's bytes are no longer needed: the peak holds one copy, not two
    MemorySnapshot snap = to_snapshot(std::move(data), path);
    snap.rank = prof::rank_from_file_name(path);
    return snap;
}

bool is_memory_snapshot_path(const std::string& path) {
    const std::string ext = std::filesystem::path(path).extension().string();
    if (ext == ".pickle" || ext == ".pkl") return true;
    if (ext != ".json") return false;
    // A snapshot's JSON starts with {"segments" (json.dump of the dict) within its first bytes.
    std::ifstream in(path, std::ios::binary);
    char head[256] = {};
    in.read(head, sizeof head);
    const std::string_view text(head, size_t(in.gcount()));
    return text.find("\"segments\"") != std::string_view::npos ||
           text.find("\"device_traces\"") != std::string_view::npos;
}

}  // namespace us::snap
