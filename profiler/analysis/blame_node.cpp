// A node, not a rank (blame_node.h): the stragglers' waiting summed by host, the rule applied to the host most to
// blame against the next, and the verdict that names it.
#include "profiler/analysis/blame_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace us::prof {

namespace {

// Whether `n` passes the rule as one rank would (apply_rule in blame.cpp): most of the waiting, far more than the
// next host, enough of a step for each waiting rank, and on top step after step.
bool passes(const BlameRules& rules, const NodeBlame& n, double next_s, double per_waiter_per_step, double step_s) {
    const int min_steps = std::max(rules.min_steps, int(std::ceil(rules.min_step_fraction * n.steps_with_waiting)));
    return n.share >= rules.min_share && (next_s <= 0 || n.others_waited_s >= rules.min_ratio * next_s) &&
           per_waiter_per_step >= rules.min_step_share * step_s && n.steps_on_top >= min_steps;
}

// The node's ranks' wait for a core against the other ranks', where every rank's is known (RankDigest): weighed by
// their time on a core where every rank's is known too, as a straggler's is (blame_core_wait.h).
void add_core_waits(const std::vector<RankDigest>& digests, double late_s, NodeBlame& n) {
    std::vector<CoreTimes> on, off;
    for (const RankDigest& d : digests) {
        const CoreTimes t = d.steady_core_times();
        if (t.trainer_wait_s < 0) return;
        (d.host == n.host ? on : off).push_back(t);
    }
    if (on.empty() || off.empty()) return;
    auto mean = [](const std::vector<CoreTimes>& v, auto figure) {
        double sum = 0;
        for (const CoreTimes& t : v) {
            const double x = figure(t);
            if (x < 0) return -1.0;
            sum += x;
        }
        return sum / double(v.size());
    };
    auto wait = [](const CoreTimes& t) { return t.trainer_wait_s; };
    auto cpu = [](const CoreTimes& t) { return t.trainer_cpu_s; };
    auto share = [](const CoreTimes& t) { return waiting_share(t.trainer_wait_s, t.trainer_cpu_s); };
    n.core_wait_s = mean(on, wait), n.others_core_wait_s = mean(off, wait), n.late_s = late_s;
    n.wait_share = mean(on, share), n.others_wait_share = mean(off, share);
    if (n.wait_share >= 0 && n.others_wait_share >= 0 && n.others_wait_share < 1)  // linear: the mean of the ranks'
        n.excess_s = n.core_wait_s - wait_at_share_s(mean(on, cpu), n.others_wait_share);
    else if (n.wait_share < 0 && n.others_wait_share < 0) {  // traces from before the time on a core was recorded
        n.excess_s = n.core_wait_s - n.others_core_wait_s;
    }
    n.waited_for_core = n.excess_s && late_s > 0 && *n.excess_s >= 0.5 * late_s;
}

}  // namespace

void name_node(const std::vector<RankDigest>& digests, const BlameRules& rules, Blame& b) {
    if (b.culprit || b.stragglers.empty() || b.waited_s <= 0) return;  // a rank stands out alone, or no waiting
    std::map<int, std::string> host_of;
    std::map<std::string, std::vector<int>> ranks_on;  // host -> its ranks, sorted
    for (const RankDigest& d : digests) {
        if (d.host.empty()) return;  // a node is named only where every rank's host is known
        host_of[d.rank] = d.host;
        ranks_on[d.host].push_back(d.rank);
    }
    if (ranks_on.size() < 2) return;  // one host: the node is the whole run
    std::map<std::string, double> caused;
    for (const Straggler& s : b.stragglers) caused[host_of.at(s.rank)] += s.others_waited_s;
    std::vector<std::pair<std::string, double>> hosts(caused.begin(), caused.end());
    std::sort(hosts.begin(), hosts.end(), [](auto& x, auto& y) { return x.second > y.second; });
    NodeBlame n;
    n.host = hosts.front().first;
    n.ranks = ranks_on.at(n.host);
    std::sort(n.ranks.begin(), n.ranks.end());
    std::set<int> waited_for;  // the node's ranks that made others wait
    for (const Straggler& s : b.stragglers)
        if (host_of.at(s.rank) == n.host) waited_for.insert(s.rank);
    if (n.ranks.size() < 2 || waited_for.size() != n.ranks.size()) return;  // one rank, or some of a node's ranks
    n.others_waited_s = hosts.front().second;
    n.share = n.others_waited_s / b.waited_s;
    std::map<int, std::map<std::string, double>> by_step;  // step -> host -> waiting caused
    for (const RankStepWait& w : b.waits)
        if (w.caused_s > 0) by_step[w.step][host_of.at(w.rank)] += w.caused_s;
    n.steps_with_waiting = int(by_step.size());
    for (const auto& [step, at] : by_step)
        n.steps_on_top += std::max_element(at.begin(), at.end(), [](auto& x, auto& y) {
                              return x.second < y.second;
                          })->first == n.host;
    size_t steps = 1;
    double compute_ratio = 0;
    int compute_known = 0;
    for (const RankDigest& d : digests)
        if (d.host == n.host) steps = std::max(steps, d.steady().size());
    for (const Straggler& s : b.stragglers)
        if (host_of.at(s.rank) == n.host && s.compute_vs_median > 0)
            compute_ratio += s.compute_vs_median, ++compute_known;
    n.compute_vs_median = compute_known == int(n.ranks.size()) ? compute_ratio / compute_known : 0;
    const double per_waiter_per_step =
        n.others_waited_s / double(steps) / double(std::max<size_t>(1, digests.size() - 1));
    if (!passes(rules, n, hosts.size() > 1 ? hosts[1].second : 0, per_waiter_per_step, b.mean_step_s)) return;
    double off_waited = 0;  // the other nodes' ranks' waits in collectives: how late the node came, for them
    for (const RankStepWait& w : b.waits)
        if (host_of.at(w.rank) != n.host) off_waited += w.suffered_s;
    const size_t off_ranks = digests.size() - n.ranks.size();
    add_core_waits(digests, off_waited / double(steps) / double(std::max<size_t>(1, off_ranks)), n);
    for (Straggler& s : b.stragglers) s.stands_out = host_of.at(s.rank) == n.host;
    b.culprit = true;
    b.why_not.clear();  // a node is named: no rank alone was, as its verdict says
    b.node = std::move(n);
}

std::string node_verdict(const NodeBlame& n) {
    std::string load;
    if (n.excess_s) {
        auto pct = [](double share) { return share >= 0 ? fmt::format(" ({:.0f}%)", 100 * share) : std::string(); };
        const std::string waits =
            fmt::format("their threads waited for a core {:.1f} ms a step{}, the other ranks' {:.1f} ms{}",
                        1e3 * n.core_wait_s, pct(n.wait_share), 1e3 * n.others_core_wait_s, pct(n.others_wait_share));
        const std::string beyond =
            n.wait_share >= 0
                ? fmt::format("beyond what their own time on a core would have waited at that share, {:.1f} ms",
                              1e3 * *n.excess_s)
                : fmt::format("{:.1f} ms more", 1e3 * *n.excess_s);
        load = n.waited_for_core
                   ? fmt::format(
                         "; {} (measured: the kernel's run queue); {}, at least half of the {:.1f} ms they came "
                         "late: the machine's other load on the node held them (derived)",
                         waits, beyond, 1e3 * n.late_s)
                   : fmt::format("; {} (measured); {}: their trainer threads' wait does not account for it (derived)",
                                 waits, beyond);
    }
    return fmt::format(
               "node {} ({}) holds the run back: the others waited {:.3f} s for its ranks ({:.0f}% of all the waiting, the "
               "most in {} of {} steps), each of its {} ranks arriving last in turn, none alone standing out{}",
               n.host, rank_ranges(n.ranks), n.others_waited_s, 100 * n.share, n.steps_on_top, n.steps_with_waiting,
               n.ranks.size(),
               n.compute_vs_median > 0
                   ? fmt::format("; their compute is {:.2f}x their groups' other ranks' median", n.compute_vs_median)
                   : "") +
           load;
}

std::string rank_ranges(const std::vector<int>& ranks) {
    std::string out = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        out += (i ? ", " : "") + (j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : std::to_string(ranks[i]));
        i = j + 1;
    }
    return out;
}

}  // namespace us::prof
