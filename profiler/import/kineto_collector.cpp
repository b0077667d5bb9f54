// The events and outer values a Kineto trace keeps (kineto_collector.h).
#include "profiler/import/kineto_collector.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "profiler/import/kineto_names.h"

namespace us::prof {

namespace {
bool category_of(const std::string& cat, KinetoCat& out) {
    static const std::pair<std::string_view, KinetoCat> known[] = {{"cpu_op", KinetoCat::cpu_op},
                                                                   {"user_annotation", KinetoCat::user_annotation},
                                                                   {"cuda_runtime", KinetoCat::cuda_runtime},
                                                                   {"cuda_driver", KinetoCat::cuda_driver},
                                                                   {"kernel", KinetoCat::kernel},
                                                                   {"gpu_memcpy", KinetoCat::gpu_memcpy},
                                                                   {"gpu_memset", KinetoCat::gpu_memset},
                                                                   {"Kernel", KinetoCat::kernel},
                                                                   {"Memcpy", KinetoCat::gpu_memcpy},
                                                                   {"Memset", KinetoCat::gpu_memset},
                                                                   {"Runtime", KinetoCat::cuda_runtime},
                                                                   // Meta's MTIA: device work and its runtime calls
                                                                   {"mtia_ccp_events", KinetoCat::kernel},
                                                                   {"mtia_runtime", KinetoCat::cuda_runtime},
                                                                   {"Operator", KinetoCat::cpu_op}};
    for (const auto& [name, c] : known)
        if (cat == name) return out = c, true;
    return false;
}

int16_t clamp16(int64_t v) { return v < 0 || v > 32767 ? int16_t(-1) : int16_t(v); }

// Whether HTA's parser gets a stream from args.stream, written `text` (normalize_gpu_stream_numbers: Python's int()
// of it, -1 when that fails): a number, or a string of decimal digits; ROCm's "0x0" is no stream to HTA.
bool hta_reads_stream(std::string_view text) {
    if (text.empty() || text.front() != '"') return true;
    size_t digits = 0, i = 1;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) ++digits;
    return digits > 0 && i < text.size() && text[i] == '"';
}

// An integer written `text` (a [memory] event's Bytes and Addr, baseTimeNanoseconds): false when it is not one;
// an address above 2^63 keeps its bits.
bool exact_integer(std::string_view text, int64_t& out) {
    size_t at = 0;
    const bool negative = at < text.size() && text[at] == '-';
    if (negative) ++at;
    uint64_t v = 0;
    size_t digits = 0;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 20; ++at, ++digits) {
        if (v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + uint64_t(text[at] - '0');
    }
    if (digits == 0 || (at < text.size() && (text[at] == '.' || text[at] == 'e' || text[at] == 'E'))) return false;
    out = negative ? (v > uint64_t(INT64_MAX) ? INT64_MIN : -int64_t(v)) : int64_t(v);
    return true;
}

// The largest tensor among an op's inputs ("Input Dims" x the size of "Input type"), in bytes; 0 when unknown (a
// TensorList says no dtype).
uint64_t bytes_of_inputs(const KinetoEvent& e) {
    if (e.input_dims.empty() || e.input_types.empty()) return 0;
    try {
        const auto dims = nlohmann::json::parse(e.input_dims);
        const auto types = nlohmann::json::parse(e.input_types);
        if (!dims.is_array() || !types.is_array()) return 0;
        uint64_t best = 0;
        for (size_t i = 0; i < dims.size() && i < types.size(); ++i) {
            if (!types[i].is_string() || !dims[i].is_array() || dims[i].empty()) continue;
            const int size = dtype_bytes(types[i].get<std::string>());
            if (size == 0) continue;
            uint64_t n = 1;
            for (const auto& d : dims[i]) {
                if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t(1) << 40)) return 0;
                n *= uint64_t(d.get<int64_t>());
                if (n > (uint64_t(1) << 50)) return 0;
            }
            best = std::max(best, n * uint64_t(size));
        }
        return best;
    } catch (const nlohmann::json::exception&) {
        return 0;
    }
}

// c10d::send / c10d::recv_: the peer is the third of "Concrete Inputs" (tensors, group, peer, tag).
void peer_of_p2p_op(const KinetoEvent& e, KinetoSpan& s) {
    const OpClass op = collective_of(e.name);
    if ((op != OpClass::send && op != OpClass::recv) || e.concrete_inputs.empty()) return;
    try {
        const auto in = nlohmann::json::parse(e.concrete_inputs);
        if (!in.is_array() || in.size() < 3 || !in[2].is_string()) return;
        const std::string v = in[2].get<std::string>();
        int peer = 0;
        const auto r = std::from_chars(v.data(), v.data() + v.size(), peer);
        if (r.ec != std::errc() || r.ptr != v.data() + v.size() || peer < 0 || peer > 32767) return;
        (op == OpClass::send ? s.peer_dst : s.peer_src) = int16_t(peer);
    } catch (const nlohmann::json::exception&) {
    }
}

}  // namespace

uint32_t KinetoCollector::thread_of(const KinetoEvent& e) {
    const uint64_t key = uint64_t(e.pid) * 0x9E3779B97F4A7C15ULL ^ uint64_t(e.tid);
    auto it = thread_slots.find(key);
    if (it != thread_slots.end()) return it->second;
    const uint32_t slot = uint32_t(f.threads.size());
    f.threads.emplace_back(e.pid, e.tid);
    thread_slots.emplace(key, slot);
    return slot;
}
bool KinetoCollector::collective_op(uint32_t name) {
    if (name >= collective_op_by_name.size()) collective_op_by_name.resize(f.names.size(), 0);
    uint8_t& known = collective_op_by_name[name];
    if (known == 0) known = is_collective_op_name(f.names[name]) ? 2 : 1;
    return known == 2;
}

OpClass KinetoCollector::collective_named(const std::string& collective) {
    for (const auto& [text, op] : collective_by_text)
        if (text == collective) return op;
    const OpClass op = collective_of(collective);
    if (collective_by_text.size() < 64) collective_by_text.emplace_back(collective, op);
    return op;
}

int16_t KinetoCollector::group_of(const KinetoEvent& e) {
    if (e.pg_name.empty()) return -1;
    if (last_group >= 0 && e.pg_name == last_group_text) return last_group;
    const int16_t g = group_seen(e);
    if (g >= 0) last_group_text = e.pg_name, last_group = g;
    return g;
}

int16_t KinetoCollector::group_seen(const KinetoEvent& e) {
    const std::string name = valid_utf8(e.pg_name);
    for (size_t g = 0; g < f.groups.size(); ++g)
        if (f.groups[g].name == name) return int16_t(g);
    if (f.groups.size() >= 200) return -1;
    f.groups.push_back({valid_utf8(e.pg_name), valid_utf8(e.pg_desc), e.pg_ranks});
    return int16_t(f.groups.size() - 1);
}

void KinetoCollector::add(const KinetoEvent& e) {
    ++f.events;
    if ((e.ph == 'i' || e.ph == 'I') && e.name == "[memory]") {
        if (!e.has_ts) return;
        if (KinetoAllocation a; exact_integer(e.memory_bytes, a.bytes)) {
            a.t_ns = e.ts_ns;
            int64_t addr = 0;
            if (exact_integer(e.memory_addr, addr)) a.addr = uint64_t(addr);
            a.device = e.mem_device == INT64_MIN ? -1 : int32_t(std::clamp<int64_t>(e.mem_device, -1, 1 << 20));
            a.thread = thread_of(e);
            f.allocations.push_back(a);
        }
        if (e.total_allocated < 0 && e.total_reserved < 0) return;
        f.memory.push_back(
            {e.ts_ns, std::max(0.0, e.total_allocated), std::max(0.0, e.total_reserved), e.mem_device < 0});
        return;
    }
    if (e.ph != 'X') return;  // metadata, flows, counters: not mapped
    if (e.cat == "python_function") {
        ++f.python_functions;
        int64_t end = 0;
        if (e.has_ts && e.has_dur && e.dur_ns >= 0 && !__builtin_add_overflow(e.ts_ns, e.dur_ns, &end))
            f.python_spans.push_back({e.ts_ns, end, f.intern(e.name), thread_of(e)});
        return;
    }
    if (e.cat == "Trace") return;  // the profiler's own span over its window
    KinetoCat cat = KinetoCat::step;
    const bool is_step = e.name.rfind("ProfilerStep#", 0) == 0;
    const bool known = is_step || category_of(e.cat, cat);
    if (e.stream >= 0 && !(known && is_device_cat(cat)) && e.has_ts && e.dur_ns >= 0 &&
        e.ts_ns <= INT64_MAX - e.dur_ns && hta_reads_stream(e.stream_text)) {
        KinetoSpan r;
        r.begin = e.ts_ns, r.end = e.ts_ns + e.dur_ns;
        r.stream = e.stream, r.correlation = e.correlation, r.name = f.intern(e.name);
        f.stream_rows.push_back(r);
    }
    if (!known) return void(++f.unknown_categories[e.cat.empty() ? "(none)" : e.cat]);
    if (!e.has_ts) return void(++f.bad_times);
    if (e.dur_ns < 0) return void(++f.negative_durations);
    int64_t end = 0;
    if (__builtin_add_overflow(e.ts_ns, e.dur_ns, &end)) return void(++f.bad_times);
    KinetoSpan s;
    s.begin = e.ts_ns;
    s.end = end;
    s.cat = cat;
    s.name = f.intern(e.name);
    s.correlation = e.correlation;
    if (is_step) {
        int64_t n = 0;
        for (size_t i = 13; i < e.name.size() && e.name[i] >= '0' && e.name[i] <= '9' && n < 100000000; ++i)
            n = n * 10 + (e.name[i] - '0');
        s.step = int32_t(n);
    }
    if (is_device_cat(cat)) {
        s.stream = e.stream >= 0 ? e.stream : e.tid;
        if (cat != KinetoCat::kernel && e.bytes > 0) s.bytes = uint64_t(e.bytes);
    } else {
        s.thread = thread_of(e);
    }
    s.peer_src = clamp16(e.src_rank);
    s.peer_dst = clamp16(e.dst_rank);
    if (collective_op(s.name)) {  // gloo and c10d ops say no msg nelems: the shapes do
        s.bytes = bytes_of_inputs(e);
        if (e.src_rank < 0 && e.dst_rank < 0) peer_of_p2p_op(e, s);
    }
    if (!e.collective.empty() || e.in_nelems >= 0 || e.out_nelems >= 0) {
        s.collective = collective_named(e.collective);
        const int64_t nelems = std::max(e.in_nelems, e.out_nelems);
        const int size = dtype_bytes(e.dtype);
        if (nelems > 0 && size > 0 && nelems < (int64_t(1) << 56)) s.bytes = uint64_t(nelems) * uint64_t(size);
    }
    s.group = group_of(e);
    f.spans.push_back(s);
}

bool KinetoCollector::outer(const std::string& key, std::string_view text, std::string& error) {
    try {
        if (key == "distributedInfo")
            f.distributed_info = nlohmann::json::parse(text);
        else if (key == "deviceProperties")
            f.device_properties = nlohmann::json::parse(text);
        else if (key == "baseTimeNanoseconds")
            exact_integer(text, f.base_time_ns);
        else if (text.size() < 256 && text.front() != '{' && text.front() != '[')
            f.versions[key] = nlohmann::json::parse(text);
        return true;
    } catch (const nlohmann::json::exception& e) {
        error = "its '" + key + "' is not valid JSON (" + e.what() + ")";
        return false;
    }
}

}  // namespace us::prof
