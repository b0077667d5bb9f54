// Kineto [memory] events with the category their enclosing CPU ops suggest (kineto_memory_ops.h).
#include "profiler/import/kineto_memory_ops.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "profiler/import/kineto_parse.h"

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

struct Span {
    int64_t begin, end;
    uint32_t thread;
    uint32_t name;  // KinetoFile::names index
};
struct Pending {
    int64_t t_ns;
    uint32_t thread;
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

KinetoMemoryEvents memory_events_of(const KinetoFile& file, int rank) {
    KinetoMemoryEvents out;
    out.path = file.path;
    out.rank = rank;
    out.base_time_ns = file.base_time_ns;
    if (file.allocations.empty()) return out;
    // The ops that can enclose an allocation: CPU ops and annotations (the store's spans) and python functions.
    std::vector<Span> spans;
    std::unordered_map<uint32_t, uint32_t> op_of_name;  // file name index -> out.op_names index
    auto op_name = [&](uint32_t name) {
        auto [it, added] = op_of_name.emplace(name, uint32_t(out.op_names.size()));
        if (added) out.op_names.push_back(file.names[name]);
        return it->second;
    };
    for (const KinetoSpan& sp : file.spans)
        if (sp.cat == KinetoCat::cpu_op || sp.cat == KinetoCat::user_annotation)
            spans.push_back({sp.begin, sp.end, sp.thread, op_name(sp.name)});
    for (const KinetoPythonSpan& sp : file.python_spans)
        spans.push_back({sp.begin, sp.end, sp.thread, op_name(sp.name)});
    std::vector<Pending> pending;
    pending.reserve(file.allocations.size());
    for (const KinetoAllocation& a : file.allocations) {
        KinetoMemoryEvent m;
        m.t_ns = a.t_ns, m.bytes = a.bytes, m.addr = a.addr, m.device = a.device;
        pending.push_back({a.t_ns, a.thread, out.events.size()});
        out.events.push_back(m);
    }

    // Per thread, sweep the ops (outer first) and the memory events in time order: the ops open at an event enclose it.
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
        return a.thread != b.thread ? a.thread < b.thread : a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
        return a.thread != b.thread ? a.thread < b.thread : a.t_ns < b.t_ns;
    });
    std::vector<const Span*> open;
    std::vector<std::string_view> names;
    size_t s = 0;
    int64_t thread = -1;
    for (const Pending& p : pending) {
        if (int64_t(p.thread) != thread) open.clear(), thread = p.thread;
        while (s < spans.size() &&
               (spans[s].thread < p.thread || (spans[s].thread == p.thread && spans[s].begin <= p.t_ns))) {
            if (spans[s].thread == p.thread) open.push_back(&spans[s]);
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
