// The pipeline part of blame (pipeline_blame.h).
#include "profiler/analysis/pipeline_blame.h"

#include <algorithm>
#include <tuple>

namespace us::prof {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double steady_mean(const RankDigest& d, double DigestStep::*field) {
    const auto steady = d.steady();
    if (steady.empty()) return 0;
    double sum = 0;
    for (const DigestStep& s : steady) sum += s.*field;
    return sum / double(steady.size());
}

PipelineBlame pipeline_blame(const std::vector<int>& chain, const std::map<int, const RankDigest*>& by_rank,
                             int first_step) {
    PipelineBlame p;
    p.ranks = chain;
    std::map<int, int> stage_of;
    for (size_t i = 0; i < chain.size(); ++i) stage_of[chain[i]] = int(i);
    // the sends, by (sender, receiver, index)
    std::map<std::tuple<int, int, int>, const DigestTransfer*> sends;
    for (int r : chain)
        for (const DigestTransfer& t : by_rank.at(r)->transfers)
            if (t.send) sends[{r, t.peer, t.index}] = &t;
    std::vector<double> compute;
    for (int r : chain) {
        const RankDigest& d = *by_rank.at(r);
        StageBlame s;
        s.rank = r, s.stage = stage_of[r];
        s.compute_s = steady_mean(d, &DigestStep::compute_s);
        const double steps = std::max<double>(1, double(d.steady().size()));
        double up = 0, down = 0;
        for (const DigestTransfer& t : d.transfers) {
            if (t.send || t.step < first_step || !stage_of.count(t.peer)) continue;
            const auto send = sends.find({t.peer, r, t.index});
            const int64_t own = t.end - t.begin;
            const int64_t transfer = send != sends.end() ? std::min(own, send->second->end - send->second->begin) : 0;
            const double wait = double(std::max<int64_t>(0, own - transfer)) / 1e9;
            // the forward's activations come from upstream, the backward's gradients from downstream: the peer's
            // place in the chain says which (an imported trace's phases are the annotations', not always there)
            const bool upstream = stage_of[t.peer] != s.stage ? stage_of[t.peer] < s.stage : t.phase == Phase::forward;
            (upstream ? up : down) += wait;
        }
        s.waiting_upstream_s = up / steps, s.waiting_downstream_s = down / steps;
        s.schedule_bubble_s =
            std::max(0.0, steady_mean(d, &DigestStep::idle_s) - s.waiting_upstream_s - s.waiting_downstream_s);
        compute.push_back(s.compute_s);
        p.stages.push_back(s);
    }
    const auto most = std::max_element(p.stages.begin(), p.stages.end(), [](const StageBlame& a, const StageBlame& b) {
        return a.compute_s < b.compute_s;
    });
    p.bottleneck_stage = most->stage, p.bottleneck_rank = most->rank, p.bottleneck_compute_s = most->compute_s;
    p.median_compute_s = median(compute);
    return p;
}

}  // namespace us::prof
