#include "profiler/analysis/op_table.h"

#include <algorithm>
#include <unordered_map>

namespace us::prof {

double OpTable::self_s() const {
    double s = 0;
    for (const OpRow& r : rows) s += r.self_s;
    return s;
}

std::string short_op_name(std::string_view name, size_t width) {
    // The last "::" outside template brackets starts the unqualified name.
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i + 1 < name.size(); ++i) {
        if (name[i] == '<')
            ++depth;
        else if (name[i] == '>')
            depth = std::max(0, depth - 1);
        else if (depth == 0 && name[i] == ':' && name[i + 1] == ':')
            start = i + 2;
    }
    std::string s(name.substr(start));
    if (s.size() > width) {
        if (const size_t open = s.find('<'); open != std::string::npos && open > 0) s = s.substr(0, open) + "<...>";
    }
    if (s.size() > width && width > 3) s = s.substr(0, width - 3) + "...";
    return s;
}

OpTable op_table(const TraceStore& store, int rank, const std::vector<StepBreakdown>& steps) {
    OpTable table;
    table.rank = rank;
    const RankTrace* rt = store.rank(rank);
    if (!rt || steps.empty()) return table;
    std::vector<std::pair<int64_t, int64_t>> windows;
    for (const StepBreakdown& s : steps) {
        windows.emplace_back(s.begin, s.end);
        table.wall_s += s.wall_s;
    }
    std::sort(windows.begin(), windows.end());
    table.steps = int(steps.size());
    const Lane lane = rt->work_lane();
    table.device_kernels = lane == Lane::device;

    const std::vector<Span>& spans = rt->lanes[size_t(lane)].spans();  // by begin time
    std::vector<const Span*> picked;
    for (const auto& [begin, end] : windows) {
        auto it =
            std::lower_bound(spans.begin(), spans.end(), begin, [](const Span& s, int64_t t) { return s.begin < t; });
        for (; it != spans.end() && it->begin < end; ++it)
            if (it->kind == SpanKind::op) picked.push_back(&*it);
    }
    // Self time: per recording thread (a GPU's stream), walk the spans in begin order (the longer first at a tie,
    // so a parent precedes what it holds) with the stack of those still open; a span takes its overlap out of the
    // innermost open one.
    std::sort(picked.begin(), picked.end(), [](const Span* a, const Span* b) {
        if (a->thread != b->thread) return a->thread < b->thread;
        if (a->begin != b->begin) return a->begin < b->begin;
        return a->end > b->end;
    });
    std::vector<int64_t> self_ns(picked.size());
    std::vector<size_t> open;
    for (size_t i = 0; i < picked.size(); ++i) {
        const Span& s = *picked[i];
        if (i > 0 && picked[i - 1]->thread != s.thread) open.clear();
        while (!open.empty() && picked[open.back()]->end <= s.begin) open.pop_back();
        self_ns[i] = s.duration();
        if (!open.empty()) self_ns[open.back()] -= std::min(s.end, picked[open.back()]->end) - s.begin;
        open.push_back(i);
    }
    std::unordered_map<uint64_t, size_t> row_of;  // (name, class) -> row
    for (size_t i = 0; i < picked.size(); ++i) {
        const Span& s = *picked[i];
        const uint64_t key = (uint64_t(s.name) << 8) | uint64_t(s.op);
        auto [it, added] = row_of.try_emplace(key, table.rows.size());
        if (added) {
            OpRow row;
            row.name = store.name(s.name);
            row.op = s.op;
            table.rows.push_back(std::move(row));
        }
        OpRow& row = table.rows[it->second];
        ++row.calls;
        row.self_s += 1e-9 * double(std::max<int64_t>(0, self_ns[i]));
        row.total_s += 1e-9 * double(s.duration());
        row.longest_s = std::max(row.longest_s, 1e-9 * double(s.duration()));
        row.flops += s.flops;
    }
    std::sort(table.rows.begin(), table.rows.end(), [](const OpRow& a, const OpRow& b) {
        return a.self_s != b.self_s ? a.self_s > b.self_s : a.name < b.name;
    });
    return table;
}

}  // namespace us::prof
