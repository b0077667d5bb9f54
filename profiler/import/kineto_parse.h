// Pass one of the Kineto reader: one trace file streamed into a flat, compact list of what it holds (spans, memory
// samples, process groups, the small metadata objects), with every name interned. No mapping is decided here
// beyond the event's category; kineto_reader.h turns a KinetoFile into a rank of the trace store.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/event.h"
#include "profiler/import/byte_source.h"

namespace us::prof {

enum class KinetoCat : uint8_t {
    cpu_op,
    user_annotation,
    cuda_runtime,
    cuda_driver,
    kernel,
    gpu_memcpy,
    gpu_memset,
    step
};

inline bool is_device_cat(KinetoCat c) {
    return c == KinetoCat::kernel || c == KinetoCat::gpu_memcpy || c == KinetoCat::gpu_memset;
}

struct KinetoSpan {
    int64_t begin = 0, end = 0;  // ns
    int64_t correlation = -1;    // kernels and runtime calls
    int64_t stream = -1;         // device spans
    uint64_t bytes = 0;          // memcpy/memset bytes; collectives: max(in, out) nelems x dtype size (0 unknown)
    uint32_t name = 0;           // KinetoFile::names index
    uint32_t thread = 0;         // KinetoFile::threads index (host spans)
    int32_t step = 0;            // ProfilerStep#N: N
    int16_t peer_src = -1, peer_dst = -1;  // send/recv: "Src Rank" / "Dst Rank"
    int16_t group = -1;                    // KinetoFile::groups index, from the args' process group
    KinetoCat cat = KinetoCat::cpu_op;
    OpClass collective = OpClass::none;  // from the args' "Collective name"
};

struct KinetoMemorySample {
    int64_t t = 0;
    double allocated = 0, reserved = 0;
    bool cpu = false;  // Device Id -1 (host memory)
};

// A [memory] event's allocation or free (profile_memory=True): what the memory categories are inferred from
// (kineto_memory_ops.h), kept in this one pass so that nothing reads the file twice.
struct KinetoAllocation {
    int64_t t_ns = 0;
    int64_t bytes = 0;  // > 0 allocated, < 0 freed
    uint64_t addr = 0;
    int32_t device = -1;  // "Device Id": -1 host memory
    uint32_t thread = 0;  // KinetoFile::threads index
};

// A python_function event (with_stack=True): not mapped to the trace store, kept only as the ops around
// allocations (an nn.Module's forward, the optimizer's step).
struct KinetoPythonSpan {
    int64_t begin = 0, end = 0;
    uint32_t name = 0, thread = 0;
};

struct KinetoGroupSeen {
    std::string name, desc, ranks_json;
};

struct KinetoFile {
    std::string path;
    std::vector<std::string> names = {std::string()};  // index 0: the empty name
    std::unordered_map<std::string, uint32_t> name_index;
    std::vector<std::pair<int64_t, int64_t>> threads;  // (pid, tid) in first-seen order
    std::vector<KinetoSpan> spans;
    std::vector<KinetoMemorySample> memory;
    std::vector<KinetoAllocation> allocations;           // the [memory] events with their Bytes, in file order
    std::vector<KinetoPythonSpan> python_spans;          // python_function events, in file order
    int64_t base_time_ns = 0;                            // baseTimeNanoseconds (the memory profiler's clock), 0 absent
    std::vector<KinetoGroupSeen> groups;                 // process groups named in the args, first-seen order
    nlohmann::json distributed_info;                     // null when absent
    nlohmann::json device_properties;                    // null when absent
    nlohmann::json versions = nlohmann::json::object();  // small top-level scalars (schemaVersion, versions ...)
    // Rows that carry args.stream but are not kernels, memcpy or memset (cuda_sync's "Stream Sync", a cpu_op with a
    // stream): not device work to us, GPU time to HTA's temporal breakdown (hta_breakdown.h); begin, end, stream,
    // name and correlation set.
    std::vector<KinetoSpan> stream_rows;
    uint64_t json_bytes = 0, events = 0;
    uint64_t python_functions = 0, negative_durations = 0, bad_times = 0;
    std::map<std::string, uint64_t> unknown_categories;

    uint32_t intern(const std::string& s);
};

// `s` with every byte that is not part of valid UTF-8 replaced by '?'.
std::string valid_utf8(const std::string& s);

// How pass one walks the text: whole with simdjson when the trace fits (falling back to pieces), or in pieces only
// (the reference the whole walk is tested against).
enum class KinetoWalk { whole_when_it_fits, in_pieces };

// Reads a whole file (plain or gzip JSON). Throws UserError naming the file and what was read when it is not a
// Kineto trace, is cut short or damaged.
KinetoFile parse_kineto(ByteSource& source, KinetoWalk walk = KinetoWalk::whole_when_it_fits);
KinetoFile parse_kineto_file(const std::string& path);

}  // namespace us::prof
