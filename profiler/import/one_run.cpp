// Whether rank files are of one run (one_run.h).
#include "profiler/import/one_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

namespace us::prof {

std::vector<RankWindow> rank_windows(const TraceStore& store) {
    std::vector<RankWindow> out;
    for (const int rank : store.ranks()) {
        const RankTrace* rt = store.rank(rank);
        RankWindow w{rank, rt->info.host, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
        for (const LaneTrack& lane : rt->lanes)
            if (!lane.spans().empty())
                w.begin = std::min(w.begin, lane.first_begin()), w.end = std::max(w.end, lane.last_end());
        if (w.begin <= w.end) out.push_back(std::move(w));
    }
    return out;
}

OneRunCheck not_one_run(const RankWindow& a, const RankWindow& b) {
    if (a.host.empty() || a.host != b.host) return {};
    if (a.end >= b.begin && b.end >= a.begin) return {};  // they overlap
    const RankWindow& early = a.end < b.begin ? a : b;
    const RankWindow& late = a.end < b.begin ? b : a;
    const double apart_s = double(late.begin - early.end) / 1e9;
    if (apart_s <= kOneRunApartS)  // one run's ranks that profiled different steps (a capture armed a poll apart)
        return {fmt::format(
            "rank {} and rank {} ran on one host ('{}') but their traces do not overlap: rank {}'s ends "
            "{:.3f} s before rank {}'s begins, so they profiled different steps (a capture whose ranks armed a poll "
            "apart?): waits and blame between them are not of one step",
            a.rank, b.rank, a.host, early.rank, apart_s, late.rank)};
    return {
        fmt::format(
            "rank {} and rank {} ran on one host ('{}') but at different times: rank {}'s trace ends {:.3f} s before rank "
            "{}'s begins, where the ranks of one run profile the same steps on that host's clock. These are files of two "
            "runs (or two cycles of a profiler schedule) in one place: give the files of one run, each rank once",
            a.rank, b.rank, a.host, early.rank, apart_s, late.rank),
        true};
}

OneRunCheck first_not_one_run(const std::vector<RankWindow>& windows) {
    OneRunCheck warning;  // two runs win over a warning met first
    // Per host, in order of begin: a rank that begins after every earlier one has ended overlaps none of them.
    std::vector<const RankWindow*> order;
    for (const RankWindow& w : windows)
        if (!w.host.empty()) order.push_back(&w);
    std::sort(order.begin(), order.end(), [](const RankWindow* x, const RankWindow* y) {
        return std::tie(x->host, x->begin) < std::tie(y->host, y->begin);
    });
    const RankWindow* latest_end = nullptr;  // of the host's ranks so far, the one that ends last
    for (const RankWindow* w : order) {
        if (latest_end && latest_end->host == w->host) {
            if (OneRunCheck pair = not_one_run(*latest_end, *w); !pair.said.empty()) {
                if (pair.two_runs) return pair;
                if (warning.said.empty()) warning = std::move(pair);
            }
            if (w->end > latest_end->end) latest_end = w;
        } else {
            latest_end = w;
        }
    }
    return warning;
}

}  // namespace us::prof
