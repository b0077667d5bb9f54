// The report of a run from its digests (digest_report.h).
#include "profiler/runs/digest_report.h"

#include "common/core/check.h"
#include "common/core/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace us::prof {

namespace {

struct Steady {
    double wall_s = 0, compute_s = 0, overlapped_s = 0, exposed_s = 0, idle_s = 0, comm_s = 0, bubble_s = 0;
    size_t steps = 0;
};

Steady steady_of(const RankDigest& d) {
    Steady s;
    for (const DigestStep& x : d.steady()) {
        s.wall_s += x.wall_s, s.compute_s += x.compute_s, s.overlapped_s += x.overlapped_s;
        s.exposed_s += x.exposed_s, s.idle_s += x.idle_s, s.comm_s += x.comm_s, s.bubble_s += x.bubble_s;
        ++s.steps;
    }
    return s;
}

double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

// The ranks a table shows of a large run: those most to blame, then the most idle; the rest are in the JSON.
std::vector<const RankDigest*> shown_ranks(const DigestReport& r, size_t limit) {
    std::vector<const RankDigest*> out;
    std::set<int> taken;
    std::map<int, const RankDigest*> by_rank;
    for (const RankDigest& d : r.cross.digests) by_rank[d.rank] = &d;
    for (const Straggler& s : r.cross.blame.stragglers)
        if (out.size() < limit / 2 && taken.insert(s.rank).second) out.push_back(by_rank[s.rank]);
    std::vector<const RankDigest*> idle;
    for (const RankDigest& d : r.cross.digests) idle.push_back(&d);
    std::stable_sort(idle.begin(), idle.end(), [](auto* a, auto* b) {
        const Steady x = steady_of(*a), y = steady_of(*b);
        return x.idle_s + x.exposed_s > y.idle_s + y.exposed_s;
    });
    for (const RankDigest* d : idle)
        if (out.size() < limit && taken.insert(d->rank).second) out.push_back(d);
    std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
    return out;
}

}  // namespace

DigestReport digest_report(RunDigests run, int workers) {
    DigestReport r;
    r.cross = cross_rank(std::move(run.ranks));
    run.ranks.clear();
    r.run = std::move(run);
    r.workers = workers;
    return r;
}

nlohmann::json digest_report_json(const DigestReport& r) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankDigest& d : r.cross.digests) {
        const Steady s = steady_of(d);
        nlohmann::json ops = nlohmann::json::array();
        for (const DigestOp& o : d.ops)
            ops.push_back({{"name", o.name},
                           {"class", kOpClassNames[size_t(o.op)]},
                           {"calls_per_step", o.calls},
                           {"self_s_per_step", o.self_s}});
        nlohmann::json hta;
        if (d.hta)
            hta = {{"kernel_time_us", d.hta->kernel_time_us},
                   {"idle_time_us", d.hta->idle_time_us},
                   {"compute_time_us", d.hta->compute_time_us},
                   {"non_compute_time_us", d.hta->non_compute_time_us},
                   {"comp_comm_overlap_pct",
                    d.hta->comp_comm_overlap_pct ? nlohmann::json(*d.hta->comp_comm_overlap_pct) : nlohmann::json()}};
        ranks.push_back({{"rank", d.rank},
                         {"label", d.label},
                         {"host", d.host.empty() ? nlohmann::json() : nlohmann::json(d.host)},
                         {"file", d.file},
                         {"steady_steps", s.steps},
                         {"wall_s", s.wall_s},
                         {"compute_s", s.compute_s},
                         {"comm_overlapped_s", s.overlapped_s},
                         {"comm_exposed_s", s.exposed_s},
                         {"idle_s", s.idle_s},
                         {"bubble_s", s.bubble_s},
                         {"collectives", d.collectives.size()},
                         {"transfers", d.transfers.size()},
                         {"ops", ops},
                         {"hta", hta}});
    }
    return {{"source", "measured"},
            {"from", "digests"},
            {"files",
             {{"ranks", r.cross.digests.size()},
              {"trace_bytes", r.run.trace_bytes},
              {"digest_bytes", r.run.digest_bytes},
              {"from_cache", r.run.from_cache},
              {"made", r.run.made},
              {"seconds", r.run.seconds},
              {"workers", r.workers}}},
            {"blame", blame_json(r.cross.blame)},
            {"core_sharing", core_sharing_json(r.cross.core_sharing)},
            {"ranks", ranks},
            {"errors", r.run.errors},
            {"warnings", r.run.warnings}};
}

std::string format_digest_report(const DigestReport& r) {
    const RunDigests& run = r.run;
    const std::vector<RankDigest>& digests = r.cross.digests;
    std::string s = fmt::format(
        "{} rank(s) from their digests: {} of traces, digests {} ({}), {} made and {} from the cache in {:.1f} s by "
        "{} worker(s)\n\n",
        digests.size(), format_bytes(int64_t(run.trace_bytes)), format_bytes(int64_t(run.digest_bytes)),
        run.digest_bytes > 0 ? fmt::format("1/{:.0f} of them", double(run.trace_bytes) / double(run.digest_bytes))
                             : "none",
        run.made, run.from_cache, run.seconds, r.workers);
    if (const std::string shared = oversubscribed_words(r.cross.core_sharing); !shared.empty())
        s += "cores: " + shared +
             ": the ranks take turns on them, and every time below includes their turns (the threads and CPUs the "
             "ranks recorded at their start)\n\n";
    s += format_blame(r.cross.blame);
    // Each rank's steady steps: the table shows those most to blame and the most idle; the spread says the rest.
    std::vector<double> walls, idles, exposed;
    for (const RankDigest& d : digests) {
        const Steady x = steady_of(d);
        walls.push_back(x.wall_s), idles.push_back(x.idle_s), exposed.push_back(x.exposed_s);
    }
    const auto shown = shown_ranks(r, 16);
    s += fmt::format(
        "\nTime per rank, summed over the steady steps (measured; {} of {} ranks shown: the most to blame "
        "and the most idle, every rank in --json):\n",
        shown.size(), digests.size());
    s += fmt::format("  {:<24} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "rank", "wall s", "compute s", "overlap s",
                     "exposed s", "idle s");
    for (const RankDigest* d : shown) {
        const Steady x = steady_of(*d);
        s += fmt::format("  {:<24} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n", d->label, x.wall_s, x.compute_s,
                         x.overlapped_s, x.exposed_s, x.idle_s);
    }
    if (!walls.empty())
        s += fmt::format(
            "  over all ranks: wall median {:.3f} s (max {:.3f}), idle median {:.3f} s (p90 {:.3f}, max "
            "{:.3f}), exposed median {:.3f} s (max {:.3f})\n",
            quantile(walls, 0.5), quantile(walls, 1.0), quantile(idles, 0.5), quantile(idles, 0.9),
            quantile(idles, 1.0), quantile(exposed, 0.5), quantile(exposed, 1.0));
    // Where the compute goes on the rank most to blame (else the busiest): its digest keeps the leading rows.
    const RankDigest* focus = nullptr;
    for (const RankDigest& d : digests)
        if (!r.cross.blame.stragglers.empty() && d.rank == r.cross.blame.stragglers.front().rank) focus = &d;
    if (!focus && !digests.empty())
        focus = &*std::max_element(digests.begin(), digests.end(),
                                   [](auto& a, auto& b) { return steady_of(a).compute_s < steady_of(b).compute_s; });
    if (focus && !focus->ops.empty()) {
        s +=
            fmt::format("\nWhere the compute goes on {} ({}), per steady step (measured; the digest's leading rows):\n",
                        focus->label, r.cross.blame.culprit ? "the rank most to blame" : "the busiest rank");
        for (const DigestOp& o : focus->ops)
            s += fmt::format("  {:<60} {:<11} {:>8.1f} calls {:>10.3f} ms\n", o.name.substr(0, 60),
                             kOpClassNames[size_t(o.op)], o.calls, o.self_s * 1e3);
    }
    // HTA's figures over the ranks that ran on GPUs
    std::vector<double> idle_pct, overlap;
    for (const RankDigest& d : digests)
        if (d.hta && d.hta->kernel_time_us > 0) {
            idle_pct.push_back(100 * d.hta->idle_time_us / d.hta->kernel_time_us);
            if (d.hta->comp_comm_overlap_pct) overlap.push_back(*d.hta->comp_comm_overlap_pct);
        }
    if (!idle_pct.empty())
        s += fmt::format(
            "\nGPU time as Holistic Trace Analysis defines it, over {} ranks (measured): idle {:.1f}% median "
            "({:.1f}% max); comm/comp overlap {} median\n",
            idle_pct.size(), quantile(idle_pct, 0.5), quantile(idle_pct, 1.0),
            overlap.empty() ? std::string("unknown") : fmt::format("{:.1f}%", quantile(overlap, 0.5)));
    s +=
        "\nFull spans are loaded for no rank here: `ultrascope report RUN --rank R` opens rank R whole, the GUI's Ranks "
        "view any rank you pick.\n";
    for (const auto& e : run.errors) s += "\nerror: " + e + "\n";
    for (const auto& w : run.warnings) s += "\nwarning: " + w + "\n";
    return s;
}

int digest_report_exit_code(const DigestReport& r) {
    US_CHECK_INPUT(!r.cross.digests.empty(), "no rank of the run could be read (the errors above say why)");
    return r.run.errors.empty() ? 0 : 3;
}

}  // namespace us::prof
