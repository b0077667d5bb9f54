// Who holds the run back, from the ranks' digests (blame.h): the collectives matched across ranks
// (collective_match.h) tallied per rank, the stragglers ranked by the waiting they caused, the rule that names one,
// and the pipelines' stages.
#include "profiler/analysis/blame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "profiler/analysis/blame_core_wait.h"
#include "profiler/analysis/blame_node.h"
#include "profiler/analysis/pipeline_blame.h"
#include "profiler/analysis/rank_clocks.h"
#include "profiler/analysis/wait_time.h"

namespace us::prof {

namespace {

// The group instances blame reads: a pipeline's own collective (the tied embedding's gradient, between its first
// and last stage) waits for the schedule's end, whoever is slow: the pipeline's analysis says who; it blames no rank.
std::vector<bool> blamed_instances(const CollectiveMatches& m, bool pipelined) {
    std::vector<bool> out;
    for (const GroupInstance& in : m.instances) out.push_back(!pipelined || in.key.rfind("embedding|", 0) != 0);
    return out;
}

// The matched collectives tallied per rank over the steady steps: what each rank made the others wait (it arrived
// last) and what it waited for them, by group instance and by step.
struct WaitTally {
    std::map<int, Straggler> stats;                                // rank -> its counts (filled further below)
    std::map<int, std::map<size_t, double>> caused_in;             // rank -> instance -> waiting caused
    std::map<int, std::map<int, double>> caused_at;                // rank -> step -> waiting caused
    std::map<int, std::map<int, double>> suffered_at;              // rank -> step -> waiting for others
    std::map<int, std::map<size_t, std::pair<int, int>>> last_of;  // rank -> instance -> (last, matched)
};

// The waits as time (wait_time.h): each victim's waits merged, for all the waiting, what each rank made the others
// wait (per victim, summed over the victims), by group instance and by step, and what each rank waited per step.
void merge_waits(const std::vector<WaitRecord>& waits, WaitTally& t, Blame& b) {
    using Pair = std::pair<int, int>;
    using Triple = std::tuple<int, int, int>;
    for (const auto& [victim, s] : merged_seconds<int>(waits, [](const WaitRecord& w) { return w.victim; }))
        b.waited_s += s;
    for (const auto& [key, s] : merged_seconds<Pair>(waits, [](const WaitRecord& w) {
             return Pair{w.culprit, w.victim};
         }))
        t.stats[key.first].others_waited_s += s;
    for (const auto& [key, s] : merged_seconds<Triple>(waits, [](const WaitRecord& w) {
             return Triple{w.culprit, int(w.instance), w.victim};
         }))
        t.caused_in[std::get<0>(key)][size_t(std::get<1>(key))] += s;
    for (const auto& [key, s] : merged_seconds<Triple>(waits, [](const WaitRecord& w) {
             return Triple{w.culprit, w.step, w.victim};
         }))
        t.caused_at[std::get<0>(key)][std::get<1>(key)] += s;
    for (const auto& [key, s] : merged_seconds<Pair>(waits, [](const WaitRecord& w) { return Pair{w.victim, w.step}; }))
        t.suffered_at[key.first][key.second] = s;
}

WaitTally tally_waits(const std::vector<RankDigest>& digests, const CollectiveMatches& m, const std::vector<bool>& read,
                      int first_step, Blame& b) {
    WaitTally t;
    std::vector<WaitRecord> waits;
    for (const MatchedCollective& c : m.collectives) {
        if (!read[c.instance] || m.step(digests, c) < first_step) continue;
        const GroupInstance& in = m.instances[c.instance];
        const int last = in.members[c.last].rank;
        for (size_t i = 0; i < in.members.size(); ++i) {
            const int r = in.members[i].rank;
            ++t.stats[r].all_collectives;
            ++t.last_of[r][c.instance].second;
            if (i == c.last) continue;
            const DigestCollective& part = m.part(digests, c, i);
            if (const int64_t wait_ns = m.wait_ns(digests, c, i); wait_ns > 0) {
                waits.push_back({r, last, part.step, c.instance, {part.begin, part.begin + wait_ns}});
                b.edges.push_back({r, last, part.begin, m.part(digests, c, c.last).begin, wait_ns});
            }
        }
        ++b.collectives_matched;
        Straggler& s = t.stats[last];
        ++s.all_last_arrivals;
        ++t.last_of[last][c.instance].first;
        ++s.phases[std::string(kPhaseNames[size_t(m.part(digests, c, 0).phase)])];
    }
    merge_waits(waits, t, b);
    if (b.edges.size() > Blame::kMaxWaitEdges) {  // a bounded list: the longest waits
        std::nth_element(b.edges.begin(), b.edges.begin() + Blame::kMaxWaitEdges, b.edges.end(),
                         [](const WaitEdge& x, const WaitEdge& y) { return x.wait_ns > y.wait_ns; });
        b.edges.resize(Blame::kMaxWaitEdges);
    }
    std::sort(b.edges.begin(), b.edges.end(),
              [](const WaitEdge& x, const WaitEdge& y) { return x.waiter_begin_ns < y.waiter_begin_ns; });
    return t;
}

// Every rank that caused waiting, most to blame first: its share, the group instance it caused the most waiting in
// (its last arrivals there, its compute against the instance's median) and the steps it was last in.
void rank_stragglers(const std::map<int, const RankDigest*>& by_rank, const CollectiveMatches& m, WaitTally& t,
                     Blame& b, std::map<int, size_t>& group_of) {
    struct Steady {  // a rank's per steady step: worked out once
        double compute_s = 0;
        CoreTimes core;
    };
    std::map<int, Steady> steady_of;
    for (const auto& [k, d] : by_rank) steady_of[k] = {steady_mean(*d, &DigestStep::compute_s), d->steady_core_times()};
    for (auto& [r, s] : t.stats) {
        const RankDigest& d = *by_rank.at(r);
        s.rank = r, s.label = d.label;
        s.share = b.waited_s > 0 ? s.others_waited_s / b.waited_s : 0;
        const Steady& own = steady_of.at(r);
        s.compute_s = own.compute_s;
        const auto& in = t.caused_in[r];
        if (!in.empty()) {
            const size_t most =
                std::max_element(in.begin(), in.end(), [](auto& a, auto& c) { return a.second < c.second; })->first;
            s.group = m.instances[most].name;
            group_of[r] = most;
            std::tie(s.last_arrivals, s.collectives) = t.last_of[r][most];
            // against the group's other ranks: with itself in, a group of two would take its mean
            std::vector<double> compute;
            std::vector<CoreTimes> waits;
            for (const InstanceMember& member : m.instances[most].members)
                if (member.rank != r) {
                    compute.push_back(steady_of.at(member.rank).compute_s);
                    waits.push_back(steady_of.at(member.rank).core);
                }
            s.group_median_compute_s = median(compute);
            s.compute_vs_median = s.group_median_compute_s > 0 ? s.compute_s / s.group_median_compute_s : 0;
            // the waiting it caused in this group alone (others_waited_s sums every group), over its other ranks
            s.late_s = in.at(most) / std::max<double>(1, double(d.steady().size())) /
                       double(std::max<size_t>(1, compute.size()));
            judge_core_waits(s, own.core, waits);
        }
        std::vector<std::pair<int, double>> at(t.caused_at[r].begin(), t.caused_at[r].end());
        std::sort(at.begin(), at.end(), [](auto& x, auto& y) { return x.second > y.second; });
        for (const auto& [step, w] : at) s.steps.push_back(step);
        if (s.others_waited_s > 0) b.stragglers.push_back(s);
    }
    std::sort(b.stragglers.begin(), b.stragglers.end(),
              [](const Straggler& x, const Straggler& y) { return x.others_waited_s > y.others_waited_s; });
}

// The Ranks view's cells (by rank, then step), and for each straggler the steps in which it caused more waiting
// than any other rank: a rank that holds the others back does so step after step; noise picks a different rank
// each step.
void step_cells(const WaitTally& t, Blame& b) {
    std::map<std::pair<int, int>, RankStepWait> cells;
    for (const auto& [r, at] : t.caused_at)
        for (const auto& [step, w] : at) cells[{r, step}] = {r, step, w, 0};
    for (const auto& [r, at] : t.suffered_at)
        for (const auto& [step, w] : at) {
            RankStepWait& c = cells[{r, step}];
            c.rank = r, c.step = step, c.suffered_s = w;
        }
    for (const auto& [key, c] : cells) b.waits.push_back(c);
    std::map<int, std::pair<int, double>> top_of_step;  // step -> (rank, waiting caused)
    for (const auto& [r, at] : t.caused_at)
        for (const auto& [step, w] : at)
            if (auto& top = top_of_step[step]; w > top.second) top = {r, w};
    for (Straggler& s : b.stragglers) {
        s.steps_with_waiting = int(top_of_step.size());
        s.steps_on_top = int(std::count_if(top_of_step.begin(), top_of_step.end(),
                                           [&](const auto& top) { return top.second.first == s.rank; }));
    }
}

// The rule (BlameRules): one rank stands out when it caused most of the waiting, far more than the next, and
// enough of a step to matter; otherwise the waiting is noise spread over the ranks, and no culprit is invented. The
// first rule the top rank fails is kept, so that "nothing stands out" can be checked.
void apply_rule(const BlameRules& rules, const RankDigest& top_digest, size_t instance_members, Blame& b) {
    if (b.stragglers.empty()) return;
    Straggler& top = b.stragglers.front();
    const double next = b.stragglers.size() > 1 ? b.stragglers[1].others_waited_s : 0;
    const double steps_counted = std::max<double>(1, double(top_digest.steady().size()));
    const double per_waiter_per_step =
        top.others_waited_s / steps_counted / double(std::max<size_t>(1, instance_members - 1));
    const int steps_with_waiting = top.steps_with_waiting;
    const int min_steps = std::max(rules.min_steps, int(std::ceil(rules.min_step_fraction * steps_with_waiting)));
    if (top.share < rules.min_share)
        b.why_not =
            fmt::format("it caused {:.0f}% of the waiting, under {:.0f}%", 100 * top.share, 100 * rules.min_share);
    else if (next > 0 && top.others_waited_s < rules.min_ratio * next)
        b.why_not = fmt::format("it caused {:.1f}x what the next rank did, under {:.1f}x", top.others_waited_s / next,
                                rules.min_ratio);
    else if (per_waiter_per_step < rules.min_step_share * b.mean_step_s)
        b.why_not = fmt::format("each other rank waited {:.1f}% of a step a step for it, under {:.0f}%",
                                100 * per_waiter_per_step / std::max(1e-12, b.mean_step_s), 100 * rules.min_step_share);
    else if (top.steps_on_top < min_steps)
        b.why_not = fmt::format("it caused the most waiting in {} of {} steps, under {}", top.steps_on_top,
                                steps_with_waiting, min_steps);
    top.stands_out = b.why_not.empty();
    b.culprit = top.stands_out;
}

// The verdict in one line: the culprit, or that nothing stands out (and why), then any pipeline's bottleneck stage.
void say_verdict(Blame& b) {
    if (b.node) {
        b.verdict = node_verdict(*b.node);
    } else if (b.culprit) {
        const Straggler& s = b.stragglers.front();
        b.verdict =
            fmt::format(
                "{} holds the run back: the others waited {:.3f} s for it ({:.0f}% of all the waiting, the most in {} of "
                "{} steps), as it arrived last in {} of the {} collectives of group {}{}",
                s.label, s.others_waited_s, 100 * s.share, s.steps_on_top, s.steps_with_waiting, s.last_arrivals,
                s.collectives, s.group,
                s.compute_vs_median > 0
                    ? fmt::format("; its compute is {:.2f}x its group's other ranks' median", s.compute_vs_median)
                    : "") +
            core_wait_words(s);
    } else if (b.collectives_matched == 0) {
        b.verdict = "no collective was matched across ranks (one rank, or no collectives in the trace)";
    } else {
        b.verdict = fmt::format("nothing stands out: {:.3f} s of waiting over {} collectives, spread over the ranks{}",
                                b.waited_s, b.collectives_matched,
                                b.stragglers.empty() ? ""
                                                     : fmt::format(" (the most, {}, caused {:.0f}%; not named: {})",
                                                                   b.stragglers.front().label,
                                                                   100 * b.stragglers.front().share, b.why_not));
    }
    for (PipelineBlame& p : b.pipelines)
        p.stands_out = p.median_compute_s > 0 && p.bottleneck_compute_s > 1.25 * p.median_compute_s;
    for (const PipelineBlame& p : b.pipelines)
        if (p.stands_out)
            b.verdict += fmt::format(
                "; pipeline stage {} (rank {}) is its bottleneck: {:.3f} s of work a step, {:.2f}x "
                "the stages' median",
                p.bottleneck_stage, p.bottleneck_rank, p.bottleneck_compute_s,
                p.bottleneck_compute_s / p.median_compute_s);
}

}  // namespace

Blame blame(const std::vector<RankDigest>& digests, const CollectiveMatches& matches, const PipelineStages& pipelines,
            const BlameRules& rules) {
    Blame b;
    if (digests.empty()) {
        b.verdict = "no ranks";
        return b;
    }
    std::map<int, const RankDigest*> by_rank;
    for (const RankDigest& d : digests) by_rank[d.rank] = &d;
    const int first_step = first_steady_step(digests);
    const std::vector<bool> read = blamed_instances(matches, !pipelines.pipelines.empty());
    b.clocks = clocks_of(digests, matches, read, first_step);
    std::vector<double> steps;
    for (const RankDigest& d : digests) steps.push_back(steady_mean(d, &DigestStep::wall_s));
    b.mean_step_s = std::accumulate(steps.begin(), steps.end(), 0.0) / double(steps.size());
    WaitTally t = tally_waits(digests, matches, read, first_step, b);
    std::map<int, size_t> group_of;  // rank -> the instance it caused the most waiting in
    rank_stragglers(by_rank, matches, t, b, group_of);
    step_cells(t, b);
    if (!b.stragglers.empty()) {
        const int top = b.stragglers.front().rank;
        const auto in = group_of.find(top);
        apply_rule(rules, *by_rank.at(top), in == group_of.end() ? 0 : matches.instances[in->second].members.size(), b);
        name_node(digests, rules, b);
    }
    for (const auto& chain : pipelines.pipelines) {
        b.pipelines.push_back(pipeline_blame(chain, by_rank, first_step));
        b.pipelines.back().order_from = pipelines.order_from;
    }
    say_verdict(b);
    return b;
}

Blame blame(const std::vector<RankDigest>& digests, const BlameRules& rules) {
    return blame(digests, match_collectives(digests), pipeline_stages(digests), rules);
}

nlohmann::json blame_json(const Blame& b) {
    nlohmann::json stragglers = nlohmann::json::array(), pipelines = nlohmann::json::array(),
                   clocks = nlohmann::json::array();
    for (const Straggler& s : b.stragglers)
        stragglers.push_back(
            {{"rank", s.rank},
             {"label", s.label},
             {"group", s.group},
             {"last_arrivals", s.last_arrivals},
             {"collectives", s.collectives},
             {"all_last_arrivals", s.all_last_arrivals},
             {"all_collectives", s.all_collectives},
             {"others_waited_s", s.others_waited_s},
             {"share", s.share},
             {"compute_s", s.compute_s},
             {"group_median_compute_s", s.group_median_compute_s},
             {"compute_vs_median", s.compute_vs_median > 0 ? nlohmann::json(s.compute_vs_median) : nlohmann::json()},
             {"late_s", s.late_s},
             {"core_wait", core_wait_json(s.trainer_wait)},
             {"workers_core_wait", core_wait_json(s.workers_wait)},
             {"waited_for_core", s.waited_for_core},
             {"workers_may_have_waited_for_core", s.workers_may_have_waited},
             {"steps", s.steps},
             {"steps_on_top", s.steps_on_top},
             {"steps_with_waiting", s.steps_with_waiting},
             {"phases", s.phases},
             {"stands_out", s.stands_out}});
    for (const PipelineBlame& p : b.pipelines) {
        nlohmann::json stages = nlohmann::json::array();
        for (const StageBlame& s : p.stages)
            stages.push_back({{"rank", s.rank},
                              {"stage", s.stage},
                              {"compute_s", s.compute_s},
                              {"waiting_upstream_s", s.waiting_upstream_s},
                              {"waiting_downstream_s", s.waiting_downstream_s},
                              {"schedule_bubble_s", s.schedule_bubble_s}});
        pipelines.push_back({{"ranks", p.ranks},
                             {"bottleneck_stage", p.bottleneck_stage},
                             {"bottleneck_rank", p.bottleneck_rank},
                             {"stands_out", p.stands_out},
                             {"bottleneck_compute_s", p.bottleneck_compute_s},
                             {"median_compute_s", p.median_compute_s},
                             {"order_from", p.order_from},
                             {"stages", stages}});
    }
    for (const RankClock& c : b.clocks)
        clocks.push_back({{"rank", c.rank},
                          {"offset_ns", c.offset_ns ? nlohmann::json(*c.offset_ns) : nlohmann::json()},
                          {"uncertainty_ns", c.uncertainty_ns ? nlohmann::json(*c.uncertainty_ns) : nlohmann::json()},
                          {"method", c.method}});
    return {{"source", "measured"},
            {"verdict", b.verdict},
            {"culprit", b.culprit},
            {"node", b.node ? nlohmann::json(b.node->host) : nlohmann::json()},
            {"node_core_wait",
             b.node && b.node->core_wait_s >= 0
                 ? nlohmann::json{{"core_wait_s", b.node->core_wait_s},
                                  {"others_core_wait_s", b.node->others_core_wait_s},
                                  {"share",
                                   b.node->wait_share >= 0 ? nlohmann::json(b.node->wait_share) : nlohmann::json()},
                                  {"others_share", b.node->others_wait_share >= 0
                                                       ? nlohmann::json(b.node->others_wait_share)
                                                       : nlohmann::json()},
                                  {"excess_s", b.node->excess_s ? nlohmann::json(*b.node->excess_s) : nlohmann::json()},
                                  {"late_s", b.node->late_s},
                                  {"waited_for_core", b.node->waited_for_core}}
                 : nlohmann::json()},
            {"why_not", b.why_not.empty() ? nlohmann::json() : nlohmann::json(b.why_not)},
            {"collectives_matched", b.collectives_matched},
            {"waited_s", b.waited_s},
            {"mean_step_s", b.mean_step_s},
            {"stragglers", stragglers},
            {"pipelines", pipelines},
            {"clocks", clocks}};
}

std::string format_blame(const Blame& b) {
    std::string s =
        "Who holds the run back (measured: waits matched across each process group's ranks):\n  " + b.verdict + "\n";
    if (!b.stragglers.empty()) {
        s += fmt::format("  {:<44} {:>10} {:>14} {:>7} {:>12} {:>16}  {}\n", "rank (most waiting caused first)",
                         "others wait", "last / matched", "share", "top in steps", "compute vs group", "in group");
        for (size_t i = 0; i < b.stragglers.size() && i < 8; ++i) {
            const Straggler& x = b.stragglers[i];
            s += fmt::format("  {:<44} {:>9.3f}s {:>7d} / {:<6d} {:>6.0f}% {:>6d} / {:<3d} {:>16} {}{}\n", x.label,
                             x.others_waited_s, x.last_arrivals, x.collectives, 100 * x.share, x.steps_on_top,
                             x.steps_with_waiting,
                             x.compute_vs_median > 0 ? fmt::format("{:.2f}x", x.compute_vs_median) : "-", x.group,
                             x.stands_out ? "  <- holds the run back" : "");
        }
        if (b.stragglers.size() > 8) s += fmt::format("  ... and {} more ranks\n", b.stragglers.size() - 8);
    }
    for (const PipelineBlame& p : b.pipelines) {
        s += fmt::format(
            "  pipeline {} (stages ordered by {}): bottleneck stage {} (rank {}), {:.3f} s of work a step "
            "against a median of {:.3f} s\n",
            nlohmann::json(p.ranks).dump(), p.order_from, p.bottleneck_stage, p.bottleneck_rank, p.bottleneck_compute_s,
            p.median_compute_s);
        s += "    stage  rank     work s   waiting upstream s   waiting downstream s   schedule bubble s  (per step)\n";
        for (const StageBlame& st : p.stages)
            s += fmt::format("    {:>5} {:>5} {:>10.3f} {:>20.3f} {:>22.3f} {:>19.3f}\n", st.stage, st.rank,
                             st.compute_s, st.waiting_upstream_s, st.waiting_downstream_s, st.schedule_bubble_s);
    }
    bool estimated = false;
    for (const RankClock& c : b.clocks) estimated = estimated || c.method == "collectives";
    if (estimated) {
        s += "  clocks (the trace gives none; estimated from the collectives' ends): ";
        for (size_t i = 0; i < b.clocks.size() && i < 8; ++i) {
            const RankClock& c = b.clocks[i];
            s += fmt::format("{}rank {} {}", i ? ", " : "", c.rank,
                             c.offset_ns ? fmt::format("{:+.3f} ms +- {:.3f}", double(*c.offset_ns) / 1e6,
                                                       double(c.uncertainty_ns.value_or(0)) / 1e6)
                                         : std::string("unknown"));
        }
        s += b.clocks.size() > 8 ? ", ...\n" : "\n";
    }
    return s;
}

}  // namespace us::prof
