#include "profiler/trace/launch_times.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace us::prof {

LaunchTimes launch_times(const TraceStore& store, int rank) {
    LaunchTimes out;
    const RankTrace* rt = store.rank(rank);
    if (!rt) return out;
    const auto& dev = rt->lanes[size_t(Lane::device)].spans();
    const auto& comm = rt->lanes[size_t(Lane::device_comm)].spans();
    out.device.assign(dev.size(), INT64_MIN);
    out.device_comm.assign(comm.size(), INT64_MIN);
    // Imported traces: the reader keeps no launch times in the store (yet); engine traces: the host lane's op spans.
    if (rt->metadata.value("source", std::string()) == "kineto") return out;
    using Key = std::tuple<int, int, int, int, int>;  // step, micro-batch, layer, phase, op class (-1: any)
    std::map<Key, std::vector<int64_t>> op_begins;
    for (const Span& s : rt->lanes[size_t(Lane::host)].spans()) {
        if (s.kind != SpanKind::op) continue;
        op_begins[{s.step, s.micro_batch, s.layer, int(s.phase), int(s.op)}].push_back(s.begin);
        op_begins[{s.step, s.micro_batch, s.layer, int(s.phase), -1}].push_back(s.begin);
    }
    if (op_begins.empty()) return out;
    for (auto& [k, v] : op_begins) std::sort(v.begin(), v.end());
    // Per stream, in the order the GPU ran them (the order they were launched in).
    struct Ref { int64_t begin; bool on_comm; size_t index; };
    std::map<int, std::vector<Ref>> by_stream;
    for (size_t i = 0; i < dev.size(); ++i) by_stream[dev[i].thread].push_back({dev[i].begin, false, i});
    for (size_t i = 0; i < comm.size(); ++i) by_stream[comm[i].thread].push_back({comm[i].begin, true, i});
    size_t found = 0;
    for (auto& [stream, refs] : by_stream) {
        std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) { return a.begin < b.begin; });
        int64_t previous = INT64_MIN;
        for (const Ref& r : refs) {
            const Span& s = r.on_comm ? comm[r.index] : dev[r.index];
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
    if (found > 0)
        out.source = "inferred: the begin of the launching op on the host lane (a lower bound of the launch call)";
    return out;
}

}  // namespace us::prof
