// Steps derived from optimizer steps, and the check that every rank captured the same ones (step_check.h).
#include "profiler/capture/step_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace us::capture {

std::vector<TimeSpan> derive_steps(const RawTrace& trace) {
    if (!trace.profiler_steps.empty()) return trace.profiler_steps;
    std::vector<TimeSpan> steps;
    int64_t last_end = INT64_MIN;
    for (const TimeSpan& opt : trace.optimizer_steps) {
        if (opt.end <= last_end) continue;  // inside the one before (an optimizer stepping another): not a step
        const int64_t begin = steps.empty() ? std::min(trace.window_begin, opt.begin) : last_end;
        steps.push_back({begin, opt.end});
        last_end = opt.end;
    }
    return steps;
}

namespace {

// "1 [0.0, 24.9] ms, 2 [24.9, 38.0] ms": a rank's steps in ms from `origin` (wall clock, ns).
std::string describe_steps(const RankSteps& r, int64_t origin) {
    if (r.steps.empty()) return "no optimizer step";
    std::string out;
    for (size_t k = 0; k < r.steps.size(); ++k) {
        const double b = double(r.steps[k].begin + r.clock_base_ns - origin) / 1e6;
        const double e = double(r.steps[k].end + r.clock_base_ns - origin) / 1e6;
        out += fmt::format("{}{} [{:.1f}, {:.1f}] ms", k ? ", " : "", k + 1, b, e);
    }
    return out;
}

// The share of the shorter of two steps that both cover (wall clock).
double overlap_share(const TimeSpan& a, int64_t a_base, const TimeSpan& b, int64_t b_base) {
    const int64_t begin = std::max(a.begin + a_base, b.begin + b_base);
    const int64_t end = std::min(a.end + a_base, b.end + b_base);
    const int64_t shortest = std::min(a.end - a.begin, b.end - b.begin);
    if (shortest <= 0) return end >= begin ? 1.0 : 0.0;
    return std::max<double>(0.0, double(end - begin)) / double(shortest);
}

}  // namespace

StepCheck check_same_steps(const std::vector<RankSteps>& ranks) {
    StepCheck out;
    if (ranks.empty()) return out;
    std::map<size_t, int> count_of;  // steps -> ranks with that many
    out.steps = int(ranks.front().steps.size());
    int64_t origin = INT64_MAX;
    for (const RankSteps& r : ranks) {
        ++count_of[r.steps.size()];
        out.steps = std::min(out.steps, int(r.steps.size()));
        if (!r.steps.empty()) origin = std::min(origin, r.steps.front().begin + r.clock_base_ns);
    }
    size_t common = 0;  // the commonest count (the larger of two as common: the rank that lacks a step is named)
    int common_ranks = 0;
    for (const auto& [count, n] : count_of)
        if (n >= common_ranks) common = count, common_ranks = n;
    const RankSteps& ref = *std::find_if(ranks.begin(), ranks.end(), [&](auto& r) { return r.steps.size() == common; });
    std::vector<std::string> lines;
    for (const RankSteps& r : ranks) {
        if (&r == &ref) continue;
        std::string why;
        if (r.steps.size() != common) {
            why = fmt::format("captured {} step{} where rank {} captured {}", r.steps.size(),
                              r.steps.size() == 1 ? "" : "s", ref.rank, common);
        } else {
            for (size_t k = 0; k < common && why.empty(); ++k) {
                const double share = overlap_share(r.steps[k], r.clock_base_ns, ref.steps[k], ref.clock_base_ns);
                if (share < kSameStepOverlap)
                    why = fmt::format(
                        "ran other steps: its step {} overlaps rank {}'s step {} by {:.0f}% of the "
                        "shorter (the same step overlaps by at least {:.0f}%)",
                        k + 1, ref.rank, k + 1, share * 100, kSameStepOverlap * 100);
            }
        }
        if (why.empty()) continue;
        out.same = false;
        lines.push_back(fmt::format("rank {} {}; its steps: {} (rank {}: {}; ms from the first step's start)", r.rank,
                                    why, describe_steps(r, origin), ref.rank, describe_steps(ref, origin)));
    }
    if (common == 0 && out.same == true) {
        out.same = false;
        lines.push_back("no rank captured an optimizer step (was the job stepping an optimizer?)");
    }
    for (const std::string& l : lines) out.what += (out.what.empty() ? "" : "\n") + l;
    return out;
}

}  // namespace us::capture
