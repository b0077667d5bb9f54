#include "profiler/trace/launch_times.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace us::prof {

namespace {

// The CPU op that launched a device span (the Kineto reader's `launcher`; docs/pytorch-traces.md), where the
// store has that field: 0 (none) otherwise.
template <typename S>
uint32_t launcher_of(const S& s) {
    if constexpr (requires { s.launcher; })
        return uint32_t(s.launcher);
    else
        return 0;
}

// A CUDA runtime or driver call that puts work on a stream (cudaLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync ...).
bool is_launch_call(const std::string& n) {
    if (n.rfind("cu", 0) != 0) return false;
    return n.find("Launch") != std::string::npos || n.find("Memcpy") != std::string::npos ||
           n.find("Memset") != std::string::npos;
}

struct Ref {
    const Span* span;
    bool on_comm;
    size_t index;
};

// Device spans by stream, each stream in the order the GPU ran its work (the order it was launched in).
std::map<int, std::vector<Ref>> by_stream(const RankTrace& rt) {
    std::map<int, std::vector<Ref>> out;
    for (Lane lane : {Lane::device, Lane::device_comm}) {
        const auto& spans = rt.lanes[size_t(lane)].spans();
        for (size_t i = 0; i < spans.size(); ++i)
            out[spans[i].thread].push_back({&spans[i], lane == Lane::device_comm, i});
    }
    for (auto& [stream, refs] : out)
        std::stable_sort(refs.begin(), refs.end(),
                         [](const Ref& a, const Ref& b) { return a.span->begin < b.span->begin; });
    return out;
}

// Imported traces: a kernel whose launch call the reader joined by its correlation id carries the call's lead
// (Span::launch_lead). Otherwise the launch calls are host-lane spans inside the op that made them, and a kernel's
// launch is the first call, after the previous kernel's on its stream, made inside an op (at any depth) of the
// kernel's launcher's name in the kernel's step (one call launches one kernel): a guess that mispairs when one op
// launches onto two streams by turns. `correlated` counts the kernels found the first way.
size_t imported_launches(const TraceStore& store, const RankTrace& rt, LaunchTimes& out, size_t& correlated) {
    std::map<std::pair<int, uint32_t>, std::vector<int64_t>> calls;  // (step, enclosing op's name) -> begins
    std::map<int, std::vector<const Span*>> open;                    // per host thread, the ops still open
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans()) {
        if (s.kind != SpanKind::op) continue;
        auto& stack = open[s.thread];
        while (!stack.empty() && stack.back()->end <= s.begin) stack.pop_back();
        if (is_launch_call(store.name(s.name))) {
            // Under every op that encloses it: the reader names the innermost cpu_op, which an annotation (NCCL's
            // "nccl:all_reduce" inside record_param_comms) may sit inside of.
            for (size_t k = 0; k < stack.size(); ++k) {
                bool seen = false;
                for (size_t j = 0; j < k; ++j) seen |= stack[j]->name == stack[k]->name;
                if (!seen) calls[{s.step, stack[k]->name}].push_back(s.begin);
            }
        } else {
            stack.push_back(&s);
        }
    }
    for (auto& [k, v] : calls) std::sort(v.begin(), v.end());
    size_t found = 0;
    for (auto& [stream, refs] : by_stream(rt)) {
        int64_t previous = INT64_MIN;
        for (const Ref& r : refs) {
            if (int64_t launch = 0; r.span->launch_lead != 0 &&
                                    !__builtin_sub_overflow(r.span->begin, int64_t(r.span->launch_lead - 1), &launch)) {
                previous = launch;
                (r.on_comm ? out.device_comm : out.device)[r.index] = launch;
                ++found, ++correlated;
                continue;
            }
            const uint32_t launcher = launcher_of(*r.span);
            if (launcher == 0) continue;
            const auto it = calls.find({r.span->step, launcher});
            if (it == calls.end()) continue;
            const auto at = std::upper_bound(it->second.begin(), it->second.end(), previous);
            if (at == it->second.end() || *at > r.span->begin) continue;
            previous = *at;
            (r.on_comm ? out.device_comm : out.device)[r.index] = *at;
            ++found;
        }
    }
    return found;
}

// Engine traces: the launch call itself is not recorded, only the op that made it (its host-lane span, with the
// step, micro-batch, layer, phase and class the kernel inherits); a kernel's launch is the earliest such op not
// before the previous kernel's on its stream (an op may launch several kernels).
size_t engine_launches(const RankTrace& rt, LaunchTimes& out) {
    using Key = std::tuple<int, int, int, int, int>;  // step, micro-batch, layer, phase, op class (-1: any)
    std::map<Key, std::vector<int64_t>> op_begins;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans()) {
        if (s.kind != SpanKind::op) continue;
        op_begins[{s.step, s.micro_batch, s.layer, int(s.phase), int(s.op)}].push_back(s.begin);
        op_begins[{s.step, s.micro_batch, s.layer, int(s.phase), -1}].push_back(s.begin);
    }
    if (op_begins.empty()) return 0;
    for (auto& [k, v] : op_begins) std::sort(v.begin(), v.end());
    size_t found = 0;
    for (auto& [stream, refs] : by_stream(rt)) {
        int64_t previous = INT64_MIN;
        for (const Ref& r : refs) {
            const Span& s = *r.span;
            int64_t launch = INT64_MIN;
            for (int op : {int(s.op), -1}) {
                auto it = op_begins.find({s.step, s.micro_batch, s.layer, int(s.phase), op});
                if (it == op_begins.end()) continue;
                auto at = std::lower_bound(it->second.begin(), it->second.end(), previous);
                if (at != it->second.end() && *at <= s.begin) {
                    launch = *at;
                    break;
                }
            }
            if (launch == INT64_MIN) continue;
            previous = launch;
            (r.on_comm ? out.device_comm : out.device)[r.index] = launch;
            ++found;
        }
    }
    return found;
}

}  // namespace

LaunchTimes launch_times(const TraceStore& store, int rank) {
    LaunchTimes out;
    const RankTrace* rt = store.rank(rank);
    if (!rt) return out;
    out.device.assign(rt->lanes[size_t(Lane::device)].spans().size(), INT64_MIN);
    out.device_comm.assign(rt->lanes[size_t(Lane::device_comm)].spans().size(), INT64_MIN);
    if (rt->imported()) {
        size_t correlated = 0;
        const size_t found = imported_launches(store, *rt, out, correlated);
        if (found > 0 && correlated == found)
            out.source = "measured: each kernel's cuda_runtime launch call, joined by its correlation id";
        else if (found > 0)
            out.source =
                "measured: the cuda_runtime launch call, joined by its correlation id where the trace has one, "
                "else inside the launching op (matched by the op's name, in stream order)";
    } else if (engine_launches(*rt, out) > 0) {
        out.source = "inferred: the begin of the launching op on the host lane (a lower bound of the launch call)";
    }
    return out;
}

}  // namespace us::prof
