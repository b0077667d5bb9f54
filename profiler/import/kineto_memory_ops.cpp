// Kineto [memory] events with the category their enclosing CPU ops suggest (kineto_memory_ops.h).
#include "profiler/import/kineto_memory_ops.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/json_stream.h"
#include "profiler/import/kineto_event.h"

namespace us::prof {

namespace {

bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

bool is_optimizer(std::string_view n) {
    return has(n, "Optimizer.step") || (has(n, "torch/optim/") && !has(n, "zero_grad"));
}
bool is_backward(std::string_view n) {
    return starts(n, "autograd::engine::evaluate_function") || has(n, "run_backward") || has(n, "Backward") ||
           starts(n, "torch/autograd/") || has(n, ": backward");
}
bool is_parameter_creation(std::string_view n) {
    return has(n, "reset_parameters") || has(n, ": __init__") || has(n, "init_weights") || has(n, "torch/nn/init.py");
}
bool is_input(std::string_view n) { return has(n, "DataLoader"); }
bool is_forward(std::string_view n) {
    return starts(n, "nn.Module:") || has(n, ": forward") || ends(n, ".forward") || has(n, "_call_impl");
}

// The integer after `"key":` in an event's text (the [memory] args "Bytes" and "Addr"), without building a JSON
// tree per event: false when absent or not an integer (an address above 2^63 keeps its bits).
bool int_field(std::string_view text, std::string_view key, int64_t& out) {
    size_t at = text.find(key);
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

struct Span {
    int64_t begin, end;
    int64_t tid;
    uint32_t name;
};
struct Pending {
    int64_t t_ns, tid;
    size_t index;  // in the output's events
};

}  // namespace

ProfilerCategory infer_category_from_ops(const std::vector<std::string_view>& names) {
    using R = bool (*)(std::string_view);
    static constexpr std::pair<R, ProfilerCategory> kRules[] = {{is_optimizer, ProfilerCategory::optimizer_state},
                                                                {is_backward, ProfilerCategory::gradient},
                                                                {is_parameter_creation, ProfilerCategory::parameter},
                                                                {is_input, ProfilerCategory::input},
                                                                {is_forward, ProfilerCategory::activation}};
    for (const auto& [rule, category] : kRules)
        for (std::string_view n : names)
            if (rule(n)) return category;
    return ProfilerCategory::unknown;
}

KinetoMemoryEvents read_kineto_memory_events(const std::string& path) {
    ByteSource source(path);
    return read_kineto_memory_events(source);
}

KinetoMemoryEvents read_kineto_memory_events(ByteSource& source) {
    KinetoMemoryEvents out;
    out.path = source.name();
    JsonStream in(source);
    std::vector<Span> spans;
    std::vector<Pending> pending;
    std::unordered_map<std::string, uint32_t> name_index;
    KinetoEvent e;
    std::string error;
    auto read_events = [&] {
        in.expect('[', "to open the traceEvents list");
        if (in.accept(']')) return;
        for (;;) {
            const std::string_view text = in.value("an event of traceEvents");
            if (!parse_kineto_event(text, e, error)) in.fail("an event of traceEvents: " + error);
            if ((e.ph == 'i' || e.ph == 'I') && e.name == "[memory]" && e.has_ts) {
                KinetoMemoryEvent m;
                if (int_field(text, "\"Bytes\"", m.bytes)) {
                    m.t_ns = e.ts_ns;
                    int64_t addr = 0;
                    if (int_field(text, "\"Addr\"", addr)) m.addr = uint64_t(addr);
                    m.device = e.mem_device == INT64_MIN ? -1 : int(std::clamp<int64_t>(e.mem_device, -1, 1 << 20));
                    pending.push_back({e.ts_ns, e.tid, out.events.size()});
                    out.events.push_back(m);
                }
            } else if (e.ph == 'X' && e.has_ts && e.has_dur && e.dur_ns >= 0 &&
                       (e.cat == "cpu_op" || e.cat == "user_annotation" || e.cat == "python_function")) {
                auto [it, added] = name_index.emplace(e.name, uint32_t(out.op_names.size()));
                if (added) out.op_names.push_back(e.name);
                spans.push_back({e.ts_ns, add_saturated(e.ts_ns, e.dur_ns), e.tid, it->second});
            }
            if (in.accept(',')) continue;
            in.expect(']', "to close the traceEvents list (or ',' between events)");
            return;
        }
    };
    bool saw_events = false;
    in.expect('{', "at the start of a Kineto trace (a JSON object with traceEvents)");
    std::string key;
    if (!in.accept('}'))
        for (;;) {
            in.read_string(key, "(a key of the trace's outer object)");
            in.expect(':', "after a key");
            if (key == "traceEvents") {
                read_events();
                saw_events = true;
            } else {
                const std::string_view v = in.value("a value of the trace's outer object");
                if (key == "baseTimeNanoseconds" || key == "distributedInfo") {
                    const auto j = nlohmann::json::parse(v, nullptr, false);
                    if (key == "baseTimeNanoseconds" && j.is_number_integer()) out.base_time_ns = j.get<int64_t>();
                    if (key == "distributedInfo" && j.is_object() && j.contains("rank") &&
                        j["rank"].is_number_integer())
                        out.rank = int(std::clamp<int64_t>(j["rank"].get<int64_t>(), -1, 1 << 20));
                }
            }
            if (in.accept(',')) continue;
            in.expect('}', "to close the trace's outer object (or ',' between its keys)");
            break;
        }
    if (!saw_events) in.fail("no traceEvents list: this is not a Kineto (torch.profiler) trace");

    // Per thread, sweep the ops (outer first) and the memory events in time order: the ops open at an event enclose it.
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
        return a.tid != b.tid ? a.tid < b.tid : a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    std::sort(pending.begin(), pending.end(),
              [](const Pending& a, const Pending& b) { return a.tid != b.tid ? a.tid < b.tid : a.t_ns < b.t_ns; });
    std::vector<const Span*> open;
    std::vector<std::string_view> names;
    size_t s = 0;
    int64_t tid = INT64_MIN;
    for (const Pending& p : pending) {
        if (p.tid != tid) open.clear(), tid = p.tid;
        while (s < spans.size() && (spans[s].tid < tid || (spans[s].tid == tid && spans[s].begin <= p.t_ns))) {
            if (spans[s].tid == tid) open.push_back(&spans[s]);
            ++s;
        }
        std::erase_if(open, [&](const Span* sp) { return sp->end < p.t_ns; });
        names.clear();
        for (auto it = open.rbegin(); it != open.rend(); ++it) names.push_back(out.op_names[(*it)->name]);
        KinetoMemoryEvent& m = out.events[p.index];
        m.op = open.empty() ? 0 : open.back()->name;
        m.category = infer_category_from_ops(names);
    }
    // In time order, a free takes its allocation's category (by device and address).
    std::stable_sort(out.events.begin(), out.events.end(),
                     [](const KinetoMemoryEvent& a, const KinetoMemoryEvent& b) { return a.t_ns < b.t_ns; });
    std::unordered_map<uint64_t, ProfilerCategory> live;
    for (KinetoMemoryEvent& m : out.events) {
        const uint64_t k = m.addr * 31 + uint64_t(m.device + 1);
        if (m.bytes > 0) {
            live[k] = m.category;
        } else if (m.bytes < 0) {
            const auto it = live.find(k);
            m.allocated_in_trace = it != live.end();
            m.category = m.allocated_in_trace ? it->second : ProfilerCategory::unknown;
            if (m.allocated_in_trace) live.erase(it);
        }
    }
    return out;
}

MemoryTimeline inferred_timeline(const KinetoMemoryEvents& events, int device) {
    MemoryTimeline t;
    t.source = events.path, t.rank = events.rank;
    std::array<int64_t, kProfilerCategories> now{};
    for (const KinetoMemoryEvent& e : events.events) {
        if (e.device != device || e.bytes == 0 || (e.bytes < 0 && !e.allocated_in_trace)) continue;
        now[size_t(e.category)] = add_saturated(now[size_t(e.category)], e.bytes);
        const int64_t us = events.profiler_time_us(e);
        if (t.times_us.empty() || t.times_us.back() != us) {
            t.times_us.push_back(us);
            t.bytes.insert(t.bytes.end(), now.begin(), now.end());
        } else {
            std::copy(now.begin(), now.end(), t.bytes.end() - std::ptrdiff_t(kProfilerCategories));
        }
    }
    return t;
}

std::optional<int> busiest_device(const KinetoMemoryEvents& events) {
    std::vector<std::pair<int, int64_t>> bytes;
    for (const KinetoMemoryEvent& e : events.events) {
        if (e.bytes <= 0) continue;
        auto it = std::find_if(bytes.begin(), bytes.end(), [&](auto& p) { return p.first == e.device; });
        if (it == bytes.end())
            bytes.emplace_back(e.device, e.bytes);
        else
            it->second = add_saturated(it->second, e.bytes);
    }
    if (bytes.empty()) return std::nullopt;
    return std::max_element(bytes.begin(), bytes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
}

}  // namespace us::prof
