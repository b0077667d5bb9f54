// Pass one of the Kineto reader (kineto_parse.h): the outer object key by key, traceEvents event by event, each
// event parsed in one pass into a reused KinetoEvent and kept as a 72-byte KinetoSpan.
#include "profiler/import/kineto_parse.h"

#include <algorithm>
#include <charconv>

#include "common/core/check.h"
#include "profiler/import/json_stream.h"
#include "profiler/import/kineto_event.h"
#include "profiler/import/kineto_names.h"

namespace us::prof {

std::string valid_utf8(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const uint8_t c = uint8_t(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        bool ok = n > 0 && i + n <= s.size();
        for (size_t k = 1; ok && k < n; ++k) ok = (uint8_t(s[i + k]) & 0xC0) == 0x80;
        if (ok)
            out.append(s, i, n), i += n;
        else
            out += '?', ++i;
    }
    return out;
}

uint32_t KinetoFile::intern(const std::string& s) {
    auto it = name_index.find(s);
    if (it != name_index.end()) return it->second;
    const uint32_t id = uint32_t(names.size());
    names.push_back(valid_utf8(s));  // names reach JSON (metadata, the report): bytes that are not UTF-8 become '?'
    name_index.emplace(s, id);
    return id;
}

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

// The integer after `"key":` in an event's text (the [memory] args "Bytes" and "Addr"), without building a JSON
// tree per event: false when absent or not an integer (an address above 2^63 keeps its bits). An empty key reads
// the text itself as the integer.
// Whether HTA's parser gets a stream from args.stream (normalize_gpu_stream_numbers: Python's int() of it, -1 when
// that fails): a number, or a string of decimal digits; ROCm's "0x0" is no stream to HTA.
bool hta_reads_stream(std::string_view text) {
    size_t at = text.find("\"stream\"");
    if (at == std::string_view::npos) return true;
    at += 8;
    while (at < text.size() && (text[at] == ' ' || text[at] == ':' || text[at] == '\t' || text[at] == '\n')) ++at;
    if (at >= text.size() || text[at] != '"') return true;
    size_t digits = 0, i = at + 1;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) ++digits;
    return digits > 0 && i < text.size() && text[i] == '"';
}

bool int_field(std::string_view text, std::string_view key, int64_t& out) {
    size_t at = key.empty() ? 0 : text.find(key);
    if (at == std::string_view::npos) return false;
    at += key.size();
    while (at < text.size() && (text[at] == ' ' || text[at] == ':' || text[at] == '\t' || text[at] == '\n')) ++at;
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

struct EventCollector {
    KinetoFile& f;
    std::unordered_map<uint64_t, uint32_t> thread_slots;  // (pid, tid) hashed -> index

    uint32_t thread_of(const KinetoEvent& e) {
        const uint64_t key = uint64_t(e.pid) * 0x9E3779B97F4A7C15ULL ^ uint64_t(e.tid);
        auto it = thread_slots.find(key);
        if (it != thread_slots.end()) return it->second;
        const uint32_t slot = uint32_t(f.threads.size());
        f.threads.emplace_back(e.pid, e.tid);
        thread_slots.emplace(key, slot);
        return slot;
    }
    int16_t group_of(const KinetoEvent& e) {
        if (e.pg_name.empty()) return -1;
        const std::string name = valid_utf8(e.pg_name);
        for (size_t g = 0; g < f.groups.size(); ++g)
            if (f.groups[g].name == name) return int16_t(g);
        if (f.groups.size() >= 200) return -1;
        f.groups.push_back({valid_utf8(e.pg_name), valid_utf8(e.pg_desc), e.pg_ranks});
        return int16_t(f.groups.size() - 1);
    }

    void add(const KinetoEvent& e, std::string_view text) {
        ++f.events;
        if ((e.ph == 'i' || e.ph == 'I') && e.name == "[memory]") {
            if (!e.has_ts) return;
            if (KinetoAllocation a; int_field(text, "\"Bytes\"", a.bytes)) {
                a.t_ns = e.ts_ns;
                int64_t addr = 0;
                if (int_field(text, "\"Addr\"", addr)) a.addr = uint64_t(addr);
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
            e.ts_ns <= INT64_MAX - e.dur_ns && hta_reads_stream(text)) {
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
        if (is_collective_op_name(e.name)) {  // gloo and c10d ops say no msg nelems: the shapes do
            s.bytes = bytes_of_inputs(e);
            if (e.src_rank < 0 && e.dst_rank < 0) peer_of_p2p_op(e, s);
        }
        if (!e.collective.empty() || e.in_nelems >= 0 || e.out_nelems >= 0) {
            s.collective = collective_of(e.collective);
            const int64_t nelems = std::max(e.in_nelems, e.out_nelems);
            const int size = dtype_bytes(e.dtype);
            if (nelems > 0 && size > 0 && nelems < (int64_t(1) << 56)) s.bytes = uint64_t(nelems) * uint64_t(size);
        }
        s.group = group_of(e);
        f.spans.push_back(s);
    }
};

nlohmann::json parse_small(std::string_view text, const std::string& key, const JsonStream& in) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        in.fail("its '" + key + "' is not valid JSON (" + e.what() + ")");
    }
}

void read_events(JsonStream& in, EventCollector& sink) {
    KinetoEvent event;
    std::string error;
    in.expect('[', "to open the traceEvents list");
    if (in.accept(']')) return;
    for (;;) {
        const std::string_view text = in.value("an event of traceEvents");
        if (!parse_kineto_event(text, event, error))
            in.fail("event " + std::to_string(sink.f.events + 1) + " of traceEvents: " + error);
        sink.add(event, text);
        if (in.accept(',')) continue;
        in.expect(']', "to close the traceEvents list (or ',' between events)");
        return;
    }
}

}  // namespace

KinetoFile parse_kineto(ByteSource& source) {
    KinetoFile f;
    f.path = source.name();
    JsonStream in(source);
    EventCollector sink{f, {}};
    bool saw_events = false;
    const char first = in.peek();
    if (first == '[') {  // a bare list of events (Chrome's array form)
        read_events(in, sink);
        saw_events = true;
    } else {
        in.expect('{',
                  "at the start of a Kineto trace (a JSON object with traceEvents; nor does it start like an "
                  "Ultrascope trace)");
        std::string key;
        if (!in.accept('}'))
            for (;;) {
                in.read_string(key, "(a key of the trace's outer object)");
                in.expect(':', "after a key");
                if (key == "traceEvents") {
                    read_events(in, sink);
                    saw_events = true;
                } else {
                    const std::string_view v = in.value("a value of the trace's outer object");
                    if (key == "distributedInfo")
                        f.distributed_info = parse_small(v, key, in);
                    else if (key == "deviceProperties")
                        f.device_properties = parse_small(v, key, in);
                    else if (key == "baseTimeNanoseconds")
                        int_field(v, "", f.base_time_ns);
                    else if (v.size() < 256 && v.front() != '{' && v.front() != '[')
                        f.versions[key] = parse_small(v, key, in);
                }
                if (in.accept(',')) continue;
                in.expect('}', "to close the trace's outer object (or ',' between its keys)");
                break;
            }
    }
    if (!saw_events) in.fail("no traceEvents list: this is not a Kineto (torch.profiler) trace");
    f.json_bytes = source.bytes_out();
    return f;
}

KinetoFile parse_kineto_file(const std::string& path) {
    ByteSource source(path);
    return parse_kineto(source);
}

}  // namespace us::prof
