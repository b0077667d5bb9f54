// A Flight Recorder dump: one rank's last collectives and point-to-point operations per process group, as PyTorch's
// Flight Recorder keeps them (TORCH_FR_BUFFER_SIZE, written on a timeout or on demand) and as the engine keeps its
// own. Held flat: 4,096 ranks of 2,000 entries each must fit in well under a GiB, so an entry is numbers and ids
// into its dump's tables (strings, groups, tensor shapes, stacks). The format on disk is docs/hangs.md's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace us::flight {

// How far an entry got. PyTorch's gloo groups only ever write "scheduled" (an entry's `retired` says it completed);
// NCCL groups write "started" and "completed" as the watchdog discovers them.
enum class EntryState : uint8_t { scheduled, started, completed };
const char* entry_state_name(EntryState s);
bool parse_entry_state(std::string_view text, EntryState& out);

using StringId = uint32_t;  // an index in FlightDump::strings; 0 is the empty string

struct Frame {
    StringId name = 0, file = 0;
    int32_t line = 0;
};

// What one operation moved: each input and output tensor's sizes and dtype.
struct TensorShapes {
    std::vector<std::vector<int64_t>> input_sizes, output_sizes;
    std::vector<StringId> input_dtypes, output_dtypes;
};

// A process group as an entry names it: (name, desc). Names are unique across a job's ranks in PyTorch (groups are
// made collectively, in the same order everywhere); `pg_id` is not (a per-process counter).
struct GroupRef {
    StringId name = 0, desc = 0;
};

struct FlightEntry {
    int64_t record_id = 0;
    int64_t collective_seq_id = 0;  // per group; collectives and p2p are counted apart
    int64_t p2p_seq_id = 0;
    int64_t op_id = 0;
    int64_t time_created_ns = 0;
    int64_t time_started_ns = -1;    // time_discovered_started_ns; -1 where not recorded
    int64_t time_completed_ns = -1;  // time_discovered_completed_ns; -1 where not recorded
    float duration_ms = -1;          // device time (TORCH_NCCL_ENABLE_TIMING); < 0 where not recorded
    int32_t timeout_ms = 0;
    uint32_t group = 0;   // index in FlightDump::groups
    StringId op = 0;      // profiling_name: "nccl:all_reduce", "gloo:broadcast", "nccl:send 0->1"
    uint32_t shapes = 0;  // index in FlightDump::shapes
    uint32_t stack = 0;   // index in FlightDump::stacks (0: no frames)
    int32_t peer = -1;    // p2p: the other side's rank in the group, from the profiling name; -1 otherwise
    EntryState state = EntryState::scheduled;
    bool retired = false;  // the recorder saw it complete and moved on
    bool is_p2p = false;
};

// A group's membership as the dump's pg_config gives it (whole only where the library writes every group: NCCL;
// gloo writes one key '' with the ranks of the last group made).
struct GroupConfig {
    std::string name, desc;
    std::vector<int> ranks;  // global ranks
};

struct FlightDump {
    std::string source;   // the file it came from ("" when made in memory)
    int rank = -1;        // global rank: the dump's own "rank" key where it has one, else the file name's
    std::string host;     // the dump's "host" key, else a host name in the file name; "" when unknown
    std::string version;  // the dump format's version ("2.10")
    std::string comm_lib_version;
    int64_t pid = -1;
    std::vector<GroupConfig> pg_config;
    std::vector<std::string> strings = {""};
    std::vector<GroupRef> groups;
    std::vector<TensorShapes> shapes;
    std::vector<std::vector<Frame>> stacks = {{}};
    std::vector<FlightEntry> entries;   // in record order (oldest first)
    std::string injected_fault;         // the engine's own injected fault ("" for none): labelled as injected
    std::vector<std::string> warnings;  // what the reader repaired or skipped, one line each

    const std::string& text(StringId id) const { return strings[id]; }
    const std::string& group_name(uint32_t g) const { return strings[groups[g].name]; }
    const std::string& group_desc(uint32_t g) const { return strings[groups[g].desc]; }
    const std::string& op_name(const FlightEntry& e) const { return strings[e.op]; }
};

// Builds a dump's tables while reading or recording: strings, groups, shapes and stacks interned once each.
class FlightDumpBuilder {
public:
    explicit FlightDumpBuilder(FlightDump& dump);
    StringId string(std::string_view s);
    uint32_t group(std::string_view name, std::string_view desc);
    uint32_t shapes(TensorShapes&& s);
    uint32_t stack(std::vector<Frame>&& frames);
    uint32_t stack(const std::vector<Frame>& frames);  // copied only when new

private:
    FlightDump& dump_;
    std::unordered_map<std::string, StringId> strings_;
    std::unordered_map<uint64_t, uint32_t> groups_;
    std::unordered_map<std::string, uint32_t> shapes_;  // keyed by a canonical text of the shapes
    std::unordered_map<std::string, uint32_t> stacks_;  // keyed by the frames' ids
    std::string key_;                                   // scratch: a stack's key while it is looked up
};

// The op's short name, without the library prefix or the p2p peers: "nccl:all_reduce" -> "all_reduce",
// "nccl:send 0->1" -> "send".
std::string_view op_short_name(std::string_view profiling_name);
// The two sides a p2p profiling name carries, as group ranks: the recording rank and its peer. "send 0->1" and
// "recv 1<-0" are rank 0 sending to 1 and rank 1 receiving from 0 (PyTorch's names); "recv 0->1", with the arrow
// along the data, is rank 1 receiving from 0. False when the name carries none.
bool parse_p2p_peers(std::string_view profiling_name, int& self, int& peer);

}  // namespace us::flight
