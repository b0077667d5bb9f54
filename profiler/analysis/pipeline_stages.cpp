#include "profiler/analysis/pipeline_stages.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "profiler/analysis/intervals.h"

namespace us::prof {

namespace {

bool is_p2p(const Span& s) { return s.kind == SpanKind::comm && (s.op == OpClass::send || s.op == OpClass::recv); }

// Directed transfers src -> dst seen from either side (a send to dst, or a receive from src).
TransferEdges transfers(const TraceStore& store) {
    TransferEdges edges;
    for (int r : store.ranks()) {
        const RankTrace& rt = *store.rank(r);
        for (Lane lane : {Lane::p2p, Lane::device_comm, Lane::comm})
            for (const Span& s : rt.lanes[size_t(lane)].spans()) {
                if (!is_p2p(s) || s.peer < 0 || s.peer == r) continue;
                const auto key =
                    s.op == OpClass::send ? std::make_pair(r, int(s.peer)) : std::make_pair(int(s.peer), r);
                TransferEdge& e = edges[key];
                e.first = std::min(e.first, s.begin);
                e.forward += s.phase == Phase::forward;
                e.backward += s.phase == Phase::backward;
            }
    }
    return edges;
}

// A micro-batch annotation's index: torch.distributed.pipelining's "Forward 3" (GPipe) or "PP:2F3" (stage 2,
// micro-batch 3: the interleaved schedules); -1 for any other name.
int forward_micro_batch(const std::string& n) {
    size_t at;
    if (n.rfind("Forward ", 0) == 0)
        at = 8;
    else if (n.rfind("PP:", 0) == 0 && (at = n.find('F', 3)) != std::string::npos)
        ++at;
    else
        return -1;
    if (at >= n.size()) return -1;
    int v = 0;
    for (size_t i = at; i < n.size(); ++i) {
        if (n[i] < '0' || n[i] > '9') return -1;
        v = v * 10 + (n[i] - '0');
    }
    return v;
}

// The most distinct forward micro-batches one rank annotated in one step (0: no such annotations).
int annotated_micro_batches(const TraceStore& store) {
    int most = 0;
    for (int r : store.ranks()) {
        std::map<int, std::set<int>> per_step;
        for (const Span& s : store.rank(r)->lanes[size_t(Lane::host)].spans())
            if (s.kind == SpanKind::op)
                if (const int mb = forward_micro_batch(store.name(s.name)); mb >= 0) per_step[s.step].insert(mb);
        for (const auto& [step, mbs] : per_step) most = std::max(most, int(mbs.size()));
    }
    return most;
}

}  // namespace

std::vector<std::vector<int>> pipeline_chains(const TransferEdges& edges, std::string& order_from) {
    std::vector<std::vector<int>> out;
    std::map<int, std::set<int>> next;
    std::set<int> has_previous, ranks;
    bool by_phase = false, by_time = false;
    for (const auto& [key, e] : edges) {
        const auto [a, b] = key;
        ranks.insert(a), ranks.insert(b);
        if (a > b && edges.count({b, a})) continue;  // the pair is decided once, from its lower rank
        const auto back = edges.find({b, a});
        const TransferEdge none;
        const TransferEdge& r = back == edges.end() ? none : back->second;
        bool a_to_b;
        if (e.forward + r.backward != r.forward + e.backward) {
            a_to_b = e.forward + r.backward > r.forward + e.backward;
            by_phase = true;
        } else {
            a_to_b = e.first <= r.first;
            by_time = true;
        }
        const int from = a_to_b ? a : b, to = a_to_b ? b : a;
        next[from].insert(to);
        has_previous.insert(to);
    }
    if (next.empty()) return out;
    order_from = by_phase && by_time ? "forward-phase transfers, else the first transfer's direction"
                 : by_phase          ? "the direction of transfers made in forward phases"
                                     : "the direction of each pair's first transfer (phases unknown)";
    std::set<int> placed;
    auto walk = [&](int first) {
        std::vector<int> chain{first};
        placed.insert(first);
        for (int at = first; next.count(at);) {
            const auto it = std::find_if(next[at].begin(), next[at].end(), [&](int q) { return !placed.count(q); });
            if (it == next[at].end()) break;
            at = *it;
            chain.push_back(at);
            placed.insert(at);
        }
        if (chain.size() > 1) out.push_back(chain);
    };
    for (const auto& [first, outs] : next)
        if (!has_previous.count(first) && !placed.count(first)) walk(first);
    for (int r : ranks)  // what is left lies on cycles
        if (!placed.count(r) && next.count(r)) walk(r);
    return out;
}

PipelineStages pipeline_stages(const TraceStore& store, int microbatches) {
    PipelineStages p;
    const auto edges = transfers(store);
    if (edges.empty()) return p;
    p.pipelines = pipeline_chains(edges, p.order_from);
    size_t depth = 0;
    for (const auto& chain : p.pipelines) depth = std::max(depth, chain.size());

    if (microbatches > 0)
        p.microbatches = microbatches, p.microbatches_from = "--microbatches";
    else
        for (int r : store.ranks())
            if (const std::optional<int> m = store.rank(r)->info.microbatches) {
                p.microbatches = *m;
                p.microbatches_from = "the trace's annotations";
                break;
            }
    if (!p.microbatches)
        if (const int m = annotated_micro_batches(store); m > 0)
            p.microbatches = m, p.microbatches_from = "the schedule's annotations (Forward i, PP:<stage>F<i>)";
    if (p.microbatches && *p.microbatches > 0) p.formula = double(depth - 1) / double(*p.microbatches);

    for (const auto& chain : p.pipelines)
        for (size_t i = 0; i < chain.size(); ++i) {
            const RankTrace* rt = store.rank(chain[i]);
            if (!rt) continue;
            PipelineStage st;
            st.rank = chain[i];
            st.stage = int(i);
            st.device = rt->has_device_spans();
            // Work: the GPU's kernels (a running receive kernel is waiting for the previous stage: not work), or
            // on a CPU-only rank its compute ops.
            std::vector<Interval> work;
            const std::vector<Lane> lanes =
                st.device ? std::vector<Lane>{Lane::device, Lane::device_comm} : std::vector<Lane>{Lane::compute};
            for (Lane lane : lanes)
                for (const Span& s : rt->lanes[size_t(lane)].spans())
                    if ((st.device && !is_p2p(s)) || (!st.device && s.kind == SpanKind::op))
                        work.emplace_back(s.begin, s.end);
            const auto merged = union_of(work, INT64_MIN, INT64_MAX);
            for (const Span& step : rt->lanes[size_t(Lane::host)].spans()) {
                if (step.kind != SpanKind::step) continue;
                const auto in_step = clip(merged, step.begin, step.end);
                if (in_step.empty()) continue;
                StageStep s;
                s.step = step.step;
                const int64_t first = in_step.front().first, last = in_step.back().second;
                const int64_t busy = total_length(in_step);
                s.window_s = double(last - first) / 1e9;
                s.work_s = double(busy) / 1e9;
                s.bubble_s = double(last - first - busy) / 1e9;
                s.bubble_fraction = busy > 0 ? s.bubble_s / s.work_s : 0.0;
                st.steps.push_back(s);
            }
            p.stages.push_back(std::move(st));
        }
    return p;
}

nlohmann::json pipeline_stages_json(const PipelineStages& p) {
    if (p.empty()) return nullptr;
    nlohmann::json stages = nlohmann::json::array();
    for (const PipelineStage& st : p.stages) {
        nlohmann::json steps = nlohmann::json::array();
        for (const StageStep& s : st.steps)
            steps.push_back({{"step", s.step},
                             {"window_s", s.window_s},
                             {"work_s", s.work_s},
                             {"bubble_s", s.bubble_s},
                             {"bubble_fraction", s.bubble_fraction}});
        stages.push_back(
            {{"rank", st.rank}, {"stage", st.stage}, {"work", st.device ? "device" : "cpu compute"}, {"steps", steps}});
    }
    return {{"source", "measured"},
            {"pipelines", p.pipelines},
            {"order_from", p.order_from},
            {"microbatches", p.microbatches ? nlohmann::json(*p.microbatches) : nlohmann::json()},
            {"microbatches_from", p.microbatches ? nlohmann::json(p.microbatches_from) : nlohmann::json()},
            {"bubble_fraction_formula", p.formula ? nlohmann::json(*p.formula) : nlohmann::json()},
            {"stages", stages}};
}

std::string format_pipeline_stages(const PipelineStages& p) {
    if (p.empty()) return {};
    std::string s =
        fmt::format("\nPipeline found from the sends and receives (measured; order from {}):\n", p.order_from);
    for (const auto& chain : p.pipelines) {
        std::string line;
        for (int r : chain) line += (line.empty() ? "" : " -> ") + fmt::format("rank {}", r);
        s += "  " + line + "\n";
    }
    s += p.formula ? fmt::format("  bubble (p - 1) / m = {:.3f} (formula; m = {} from {})\n", *p.formula,
                                 *p.microbatches, p.microbatches_from)
                   : "  micro-batches unknown (give --microbatches M): no formula bubble\n";
    for (const PipelineStage& st : p.stages) {
        double bubble = 0, work = 0;
        for (const StageStep& x : st.steps) bubble += x.bubble_s, work += x.work_s;
        s +=
            fmt::format("  stage {} (rank {}, {}): bubble {:.3f} x its work time over {} step(s), {:.1f} ms per step\n",
                        st.stage, st.rank, st.device ? "device idle" : "compute idle", work > 0 ? bubble / work : 0.0,
                        st.steps.size(), st.steps.empty() ? 0.0 : 1e3 * bubble / double(st.steps.size()));
    }
    return s;
}

}  // namespace us::prof
