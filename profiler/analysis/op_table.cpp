#include "profiler/analysis/op_table.h"

#include <algorithm>
#include <unordered_map>

#include "common/core/kernel_names.h"

namespace us::prof {

double OpTable::self_s() const {
    double s = 0;
    for (const OpRow& r : rows) s += r.self_s;
    return s;
}

namespace {

// A kernel whose name says no kind of its own ("forward_kernel") is of the kind of the op that launched it.
KernelKind kind_of_op(OpClass op) {
    switch (op) {
        case OpClass::gemm:
            return KernelKind::gemm;
        case OpClass::attention:
            return KernelKind::attention;
        case OpClass::norm:
            return KernelKind::norm;
        case OpClass::activation:
            return KernelKind::elementwise;
        case OpClass::embedding:
            return KernelKind::embedding;
        case OpClass::loss:
            return KernelKind::reduction;
        case OpClass::optimizer:
            return KernelKind::optimizer;
        case OpClass::none:
            return KernelKind::other;
        default:
            return is_comm_op(op) ? KernelKind::communication : KernelKind::other;
    }
}

}  // namespace

std::string short_op_name(std::string_view name, size_t width, bool device_kernel) {
    const bool kernel = device_kernel || name.find_first_of("(<") != std::string_view::npos ||
                        name.substr(0, 5) == "void " || name.substr(0, 2) == "_Z";
    if (kernel) return fit_op_name(short_kernel_name(name), width);
    // An op's name without its namespaces ("aten::mm"); with no template, the last "::" starts the bare name.
    const size_t colons = name.rfind("::");
    return fit_op_name(colons == std::string_view::npos ? name : name.substr(colons + 2), width);
}

std::string fit_op_name(std::string_view shown, size_t width) {
    // Cut at the end: a short name's template summary says what the kernel computes ("<CUDAFunctor_add>"), so as
    // much of it as fits is worth more than "<...>".
    std::string s(shown);
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
            row.short_name = short_op_name(row.name, std::string::npos, table.device_kernels);
            row.op = s.op;
            if (table.device_kernels) {
                KernelKind kind = kernel_kind(row.name);
                if (kind == KernelKind::other) kind = kind_of_op(s.op);
                row.kind = kKernelKindNames[int(kind)];
            } else {
                row.kind = kOpClassNames[size_t(s.op)];
            }
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
