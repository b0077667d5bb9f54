// The pipeline window's bubble counts a stage's wait inside the tied embedding's all-reduce as idle
// (step_breakdown.h), from interval arithmetic that must be exact.
#include "profiler/analysis/intervals.h"
#include "profiler/analysis/step_breakdown.h"
#include "test_util.h"

using us::prof::Interval;

TEST_CASE("subtracting one union of intervals from another", "[cpu][analysis]") {
    using V = std::vector<Interval>;
    CHECK(us::prof::subtract(V{{0, 10}}, V{{2, 4}, {6, 7}}) == V{{0, 2}, {4, 6}, {7, 10}});
    CHECK(us::prof::subtract(V{{0, 10}, {20, 30}}, V{{5, 25}}) == V{{0, 5}, {25, 30}});
    CHECK(us::prof::subtract(V{{0, 10}}, V{{-5, 0}, {10, 15}}) == V{{0, 10}});  // touching is not covering
    CHECK(us::prof::subtract(V{{0, 10}}, V{{0, 10}}).empty());
    CHECK(us::prof::subtract(V{{0, 4}, {6, 9}}, V{}) == V{{0, 4}, {6, 9}});
    CHECK(us::prof::subtract(V{}, V{{0, 4}}).empty());
}

TEST_CASE("clipping a merged union to a window", "[cpu][analysis]") {
    using V = std::vector<Interval>;
    const V merged = {{0, 10}, {20, 30}, {40, 50}};
    CHECK(us::prof::clip(merged, 5, 45) == V{{5, 10}, {20, 30}, {40, 45}});
    CHECK(us::prof::clip(merged, 10, 20).empty());  // the gap between two intervals
    CHECK(us::prof::clip(merged, 25, 26) == V{{25, 26}});
    CHECK(us::prof::clip(merged, 60, 70).empty());
}

TEST_CASE(
    "a stage's wait inside the embedding all-reduce is pipeline bubble, its transfer and overlapped compute are not",
    "[cpu][analysis][pipeline]") {
    // Two stages of one replica, one step [0, 100). Stage 0 computes [0, 40) and [60, 100); stage 1 computes [0, 50)
    // then sits in the embedding all-reduce [50, 100): waiting [50, 95) (for stage 0's backward), transferring after.
    auto step = [](int rank, std::vector<Interval> compute, std::vector<Interval> comm) {
        us::prof::StepBreakdown b;
        b.rank = rank;
        b.begin = 0, b.end = 100;
        b.compute_set = us::prof::union_of(compute, 0, 100);
        std::vector<Interval> all = compute;
        all.insert(all.end(), comm.begin(), comm.end());
        b.busy_set = us::prof::union_of(all, 0, 100);
        b.first_op = b.compute_set.front().first, b.last_op = b.compute_set.back().second;
        b.compute_s = double(us::prof::total_length(b.compute_set)) / 1e9;
        return b;
    };
    std::vector<std::vector<us::prof::StepBreakdown>> steps = {{step(0, {{0, 40}, {60, 100}}, {})},
                                                               {step(1, {{0, 50}}, {{50, 100}})}};
    auto without = steps;
    us::prof::apply_pipeline_windows(without, {0, 0}, 1);
    CHECK(without[1][0].bubble_s * 1e9 == Approx(0.0));  // the wait counted as communication: no bubble
    auto with = steps;
    us::prof::apply_pipeline_windows(with, {0, 0}, 1, {{1, {{50, 95}}}});
    CHECK(with[1][0].bubble_s * 1e9 == Approx(45.0));
    CHECK(with[0][0].bubble_s * 1e9 == Approx(20.0));  // stage 0's own gap, unchanged
    // stage 1 still computing over [50, 55): only the part of the wait with no op running becomes idle
    auto overlapped = std::vector<std::vector<us::prof::StepBreakdown>>{{step(0, {{0, 40}, {60, 100}}, {})},
                                                                        {step(1, {{0, 55}}, {{50, 100}})}};
    us::prof::apply_pipeline_windows(overlapped, {0, 0}, 1, {{1, {{50, 95}}}});
    CHECK(overlapped[1][0].bubble_s * 1e9 == Approx(40.0));
    // stage 1 computes again after the all-reduce: the wait is inside its own window, so its stage bubble has it too
    auto inside = std::vector<std::vector<us::prof::StepBreakdown>>{{step(0, {{0, 40}, {60, 100}}, {})},
                                                                    {step(1, {{0, 50}, {96, 100}}, {{50, 96}})}};
    us::prof::apply_pipeline_windows(inside, {0, 0}, 1, {{1, {{50, 95}}}});
    CHECK(inside[1][0].stage_bubble_fraction == Approx(45.0 / 54.0));
    CHECK(with[1][0].stage_bubble_fraction == Approx(0.0));  // outside [0, 50): unchanged
}
