// The run's pipelines and each stage's bubble, from the digests (pipeline_stages.h).
#include "profiler/analysis/pipeline_stages.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace us::prof {

namespace {

// Point-to-point transfers in one direction between two ranks (src -> dst), seen from either side (a send to dst,
// a receive from src): the earliest one's begin, and how many were made in forward and in backward phases.
struct TransferEdge {
    int64_t first = INT64_MAX;
    int forward = 0, backward = 0;
};
using TransferEdges = std::map<std::pair<int, int>, TransferEdge>;  // (src, dst) -> their transfers

TransferEdges transfer_edges(const std::vector<RankDigest>& digests) {
    TransferEdges edges;
    for (const RankDigest& d : digests)
        for (const DigestTransfer& t : d.transfers) {
            if (t.peer < 0 || t.peer == d.rank) continue;
            TransferEdge& e = edges[t.send ? std::make_pair(d.rank, int(t.peer)) : std::make_pair(int(t.peer), d.rank)];
            e.first = std::min(e.first, t.begin);
            e.forward += t.phase == Phase::forward;
            e.backward += t.phase == Phase::backward;
        }
    return edges;
}

// The chains the transfers form (pipelines_of).
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

// The engine's pipelines, where a rank's pp coordinate says the grid has pp > 1: per data-parallel replica (its dp,
// tp and cp coordinates) its ranks by pp coordinate, those of two stages or more.
std::optional<std::vector<std::vector<int>>> grid_pipelines(const std::vector<RankDigest>& digests) {
    std::vector<std::vector<int>> out;
    bool grid = false;
    std::map<std::string, std::map<int, int>> replicas;  // replica key -> pp stage -> rank
    for (const RankDigest& d : digests) {
        if (!d.coords.pp) continue;
        if (*d.coords.pp > 0) grid = true;
        std::string key;
        for (GridDim dim : {GridDim::dp, GridDim::tp, GridDim::cp})
            key += std::to_string(d.coords[dim].value_or(0)) + ",";
        replicas[key][*d.coords.pp] = d.rank;
    }
    if (!grid) return std::nullopt;
    for (const auto& [key, stages] : replicas) {
        std::vector<int> ranks;
        for (const auto& [stage, rank] : stages) ranks.push_back(rank);
        if (ranks.size() > 1) out.push_back(ranks);
    }
    return out;
}

// m: as given; else the first rank's metadata that says; else the most any rank annotated in a step.
void count_micro_batches(const std::vector<RankDigest>& digests, int given, PipelineStages& p) {
    if (given > 0)
        p.microbatches = given, p.microbatches_from = "--microbatches";
    else
        for (const RankDigest& d : digests)
            if (d.microbatches) {
                p.microbatches = *d.microbatches;
                p.microbatches_from = "the trace's annotations";
                break;
            }
    int annotated = 0;
    for (const RankDigest& d : digests) annotated = std::max(annotated, d.annotated_microbatches);
    if (!p.microbatches && annotated > 0)
        p.microbatches = annotated, p.microbatches_from = "the schedule's annotations (Forward i, PP:<stage>F<i>)";
}

}  // namespace

std::vector<std::vector<int>> pipelines_of(const std::vector<RankDigest>& digests, std::string& order_from) {
    if (auto grid = grid_pipelines(digests)) {
        order_from = "the engine's grid (pp coordinates)";
        return *grid;
    }
    return pipeline_chains(transfer_edges(digests), order_from);
}

PipelineStages pipeline_stages(const std::vector<RankDigest>& digests, int microbatches) {
    PipelineStages p;
    p.pipelines = pipelines_of(digests, p.order_from);
    if (p.pipelines.empty()) return p;
    size_t depth = 0;
    for (const auto& chain : p.pipelines) depth = std::max(depth, chain.size());
    count_micro_batches(digests, microbatches, p);
    if (p.microbatches && *p.microbatches > 0) p.formula = double(depth - 1) / double(*p.microbatches);
    std::map<int, const RankDigest*> by_rank;
    for (const RankDigest& d : digests) by_rank[d.rank] = &d;
    for (const auto& chain : p.pipelines)
        for (size_t i = 0; i < chain.size(); ++i) {
            const auto d = by_rank.find(chain[i]);
            if (d == by_rank.end()) continue;
            PipelineStage st;
            st.rank = chain[i];
            st.stage = int(i);
            st.device = d->second->device;
            for (const WorkWindow& w : d->second->work_windows) {
                StageStep s;
                s.step = w.step;
                s.window_s = double(w.window_ns) / 1e9;
                s.work_s = double(w.work_ns) / 1e9;
                s.bubble_s = double(w.window_ns - w.work_ns) / 1e9;
                s.bubble_fraction = w.work_ns > 0 ? s.bubble_s / s.work_s : 0.0;
                st.steps.push_back(s);
            }
            p.stages.push_back(std::move(st));
        }
    return p;
}

PipelineStages pipeline_stages(const TraceStore& store, int microbatches) {
    std::vector<RankDigest> digests;
    for (int r : store.ranks()) digests.push_back(digest_without_steps(store, r));
    return pipeline_stages(digests, microbatches);
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
