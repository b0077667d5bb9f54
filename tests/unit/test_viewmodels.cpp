// The GUI's view-models on synthetic traces, without a window: timeline culling and folding, the stacked memory
// columns, the overlap bars, the training series, the run comparison and the experts' heatmap.
#include "app/gui/model/compare_model.h"
#include "app/gui/model/expert_model.h"
#include "app/gui/model/memory_model.h"
#include "app/gui/model/overlap_model.h"
#include "app/gui/model/ranks_model.h"
#include "app/gui/model/timeline_model.h"
#include "app/gui/model/training_model.h"
#include "profiler/predict/predict.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us;
using namespace us::gui;
using namespace us::prof;
using namespace us::test;

namespace {

// One lane of n back-to-back ops of 1 us each, plus a few wide layer spans above them.
TraceStore lane_store(int n) {
    SyntheticRank r(0);
    for (int i = 0; i < n; ++i) r.op(i * 1e-3, i * 1e-3 + 0.001);
    r.span(Lane::compute, SpanKind::layer, 0, n * 1e-3 / 2, "block 0");
    r.span(Lane::compute, SpanKind::layer, n * 1e-3 / 2, n * 1e-3, "block 1");
    TraceStore s;
    for (const auto& c : r.chunks("{}")) s.add_chunk(c);
    s.finalize();
    return s;
}

}  // namespace

TEST_CASE("timeline: spans nest into rows, visible ranges come from binary search", "[cpu][viewmodel]") {
    const TraceStore s = lane_store(1000);
    const LaneTrack& lane = s.rank(0)->lanes[size_t(Lane::compute)];
    REQUIRE(lane.rows() == 2);  // layers above, ops below
    CHECK(lane.row(0).size() == 2);
    CHECK(lane.row(1).size() == 1000);
    // ops 100..199 intersect [100 us, 200 us)
    const auto [a, b] = lane.visible(1, 100000, 200000);
    CHECK(b - a == 100);
    CHECK(lane.spans()[lane.row(1)[a]].begin == 100000);
}

TEST_CASE("timeline: wide spans are drawn one by one, narrow runs fold with their count", "[cpu][viewmodel]") {
    const TraceStore s = lane_store(100000);
    const LaneTrack& lane = s.rank(0)->lanes[size_t(Lane::compute)];
    std::vector<TimelineItem> items;
    // Everything on 1000 px: the 100k ops of 1 us fold; the two layers stay whole.
    build_lane_items(lane, TimeWindow{0, 100000 * 1000, 1000}, 3.0f, items);
    size_t ops_covered = 0, row0 = 0;
    for (size_t i = 0; i < items.size(); ++i) {
        const auto& it = items[i];
        if (it.row == 0) {
            ++row0;
            CHECK(it.folded == 0);
        } else {
            ops_covered += it.folded ? it.folded : 1;
            if (i + 1 < items.size()) CHECK(it.x1 - it.x0 >= 2.9f);  // folds span the minimum width (but the tail)
        }
    }
    CHECK(row0 == 2);
    CHECK(ops_covered == 100000);  // every op is in exactly one item
    CHECK(items.size() < 1000);    // a few hundred items for 100k spans
    // Deep zoom: 50 ops over 1000 px are 20 px each, all drawn individually.
    items.clear();
    build_lane_items(lane, TimeWindow{1000000, 1050000, 1000}, 3.0f, items);
    size_t individual = 0;
    for (const auto& it : items)
        if (it.row == 1) {
            CHECK(it.folded == 0);
            ++individual;
        }
    CHECK(individual == 50);
}

TEST_CASE("timeline: idle gaps between ops", "[cpu][viewmodel]") {
    SyntheticRank r(0);
    r.op(0, 10);
    r.op(20, 30);    // a 10 ms gap
    r.op(30.5, 40);  // a 0.5 ms gap
    TraceStore s;
    for (const auto& c : r.chunks("{}")) s.add_chunk(c);
    s.finalize();
    const auto gaps = idle_gaps(s.rank(0)->lanes[size_t(Lane::compute)], 0, int64_t(40e6), int64_t(1e6));
    REQUIRE(gaps.size() == 1);
    CHECK(gaps[0].begin == int64_t(10e6));
    CHECK(gaps[0].end == int64_t(20e6));
}

TEST_CASE("memory columns keep each pixel's peak and carry values between events", "[cpu][viewmodel]") {
    std::vector<MemorySample> tl;
    auto sample = [&](double t_ms, int64_t params, int64_t acts) {
        MemorySample s{};
        s.t = int64_t(t_ms * 1e6);
        s.bytes[size_t(MemCategory::params)] = params;
        s.bytes[size_t(MemCategory::activations)] = acts;
        tl.push_back(s);
    };
    sample(0, 100, 0);
    sample(1.0, 100, 50);
    sample(1.2, 100, 300);  // a short spike inside one pixel
    sample(1.4, 100, 20);
    sample(5.0, 100, 0);
    const auto cols = build_memory_columns(tl, 0, int64_t(10e6), 10);  // 1 ms per pixel
    REQUIRE(cols.size() == 10);
    CHECK(cols[0].total == 100);
    CHECK(cols[1].total == 400);  // the spike survives
    CHECK(cols[1].bytes[size_t(MemCategory::activations)] == 300);
    CHECK(cols[3].total == 120);  // carried from 1.4 ms
    CHECK(cols[9].total == 100);
    CHECK(sample_at(tl, int64_t(1.3e6))->bytes[size_t(MemCategory::activations)] == 300);
}

TEST_CASE("overlap bars add up to the wall time and mark the rank the blame names, not the most idle",
          "[cpu][viewmodel]") {
    Report rep;
    for (int r = 0; r < 3; ++r) {
        RankReport rr;
        rr.rank = r;
        rr.label = "rank " + std::to_string(r);
        rr.steady.wall_s = 1.0;
        rr.steady.compute_s = 0.7;
        rr.steady.comm_s = 0.3;
        rr.steady.overlapped_s = 0.2;
        rr.steady.exposed_s = 0.1;
        rr.steady.idle_s = r == 1 ? 0.3 : 0.2;  // wall = |C u M| + idle = 0.7 + 0.1 + 0.2
        rep.ranks.push_back(rr);
    }
    // rank 1's compute is lower by the extra idle
    rep.ranks[1].steady.compute_s = 0.6;
    OverlapModel m = build_overlap_model(rep);
    REQUIRE(m.bars.size() == 3);
    CHECK(m.marked == -1);  // rank 1 idles most: a victim; nothing blamed, nothing marked
    Straggler s;
    s.rank = 2, s.stands_out = true;
    rep.cross.blame.stragglers.push_back(s);
    m = build_overlap_model(rep);
    CHECK(m.marked == 2);
    CHECK(m.mark == "holds the run back");
    for (const auto& b : m.bars) CHECK(b.compute_only + b.overlapped + b.exposed + b.idle == Approx(1.0));
}

TEST_CASE("run comparison: the settings that differ, and the figures of each run", "[cpu][viewmodel]") {
    // read through the settings table: run 3 writes neither zero nor bucket_mb (their defaults: 0 and 1 MiB); the
    // data files differ but are left out; run 4 is an imported trace (no settings)
    std::vector<RunSummary> runs(4);
    runs[0].config = {{"dp", 2}, {"zero", 0}, {"bucket_mb", 4.0}, {"data", "a"}};
    runs[1].config = {{"dp", 2}, {"zero", 2}, {"bucket_mb", 4.0}, {"data", "b"}};
    runs[2].config = {{"dp", 2}, {"data", "c"}};
    const auto differing = differing_settings(runs);
    REQUIRE(differing.size() == 2);
    std::map<std::string, std::vector<std::string>> values;
    for (const DifferingSetting& d : differing) values[d.key] = d.values;
    CHECK(values.at("zero") == std::vector<std::string>{"0", "2", "0", "-"});
    CHECK(values.at("bucket_mb") == std::vector<std::string>{"4.0", "4.0", "1.0", "-"});
    runs.resize(2);
    runs[1].config["zero"] = 0;
    CHECK(differing_settings(runs).empty());
    CHECK(describe_config({{"dp", 2}, {"zero", 1}, {"precision", "bf16"}, {"bucket_mb", 4.0}}) ==
          "dp 2, ZeRO-1, bf16, bucket 4 MiB");
}

TEST_CASE("timeline: a wide span right after a run of narrow ones is drawn, not folded", "[cpu][viewmodel]") {
    SyntheticRank r(0);
    for (int i = 0; i < 50; ++i) r.op(i * 0.001, i * 0.001 + 0.0009);  // 50 narrow ops, 0.9 us each
    r.op(0.05, 10.0);                                                  // then a wide one
    TraceStore s;
    for (const auto& c : r.chunks("{}")) s.add_chunk(c);
    s.finalize();
    std::vector<TimelineItem> items;
    build_lane_items(s.rank(0)->lanes[size_t(Lane::compute)], TimeWindow{0, int64_t(10e6), 500}, 3.0f, items);
    REQUIRE(items.size() == 2);
    CHECK(items[0].folded == 50);
    CHECK(items[1].folded == 0);
    CHECK(items[1].span->end == int64_t(10e6));
}

TEST_CASE("experts: routing counters become per-step loads, steady shares, imbalance and drops",
          "[cpu][viewmodel][moe]") {
    // two ranks (pipeline stages) each recording its MoE layer's counters; 3 steps, 4 experts
    TraceStore store;
    const double counts[2][3][4] = {{{10, 10, 10, 10}, {20, 10, 5, 5}, {16, 8, 8, 8}},
                                    {{40, 0, 0, 0}, {10, 10, 10, 10}, {10, 10, 10, 10}}};
    for (int rank = 0; rank < 2; ++rank) {
        SyntheticRank r(rank);
        const int layer = rank == 0 ? 1 : 3;
        for (int step = 1; step <= 3; ++step) {
            for (int e = 0; e < 4; ++e)
                r.counter(step, fmt::format("moe.layer{}.expert{}", layer, e), counts[rank][step - 1][e], step);
            r.counter(step, fmt::format("moe.layer{}.dropped", layer), rank == 0 ? 4.0 : 0.0, step);
            if (rank == 0) r.counter(step, "moe_balance", 1.0 + step / 10.0, step);
        }
        r.counter(4, "moe.layer1.expert", 99, 3);  // not a routing counter: ignored
        for (const auto& c : r.chunks("{}")) store.add_chunk(c);
    }
    store.finalize();
    const ExpertRouting ro = analyze_expert_routing(store);
    REQUIRE(ro.experts == 4);
    REQUIRE(ro.layers.size() == 2);
    const LayerRouting& l1 = ro.layers[0];
    CHECK(l1.layer == 1);
    CHECK(l1.steps == std::vector<int>{1, 2, 3});
    // steady steps 2 and 3: expert 0 took 36 of 80 choices; imbalance 20/10 and 16/10; 8 dropped of 80
    CHECK(l1.share[0] == Approx(36.0 / 80));
    CHECK(l1.imbalance_mean == Approx((2.0 + 1.6) / 2));
    CHECK(l1.imbalance_max == Approx(2.0));
    CHECK(l1.dropped_fraction == Approx(8.0 / 80));
    CHECK(ro.layers[1].imbalance_max == Approx(1.0));  // its uneven step 1 is not steady
    CHECK(ro.balance == std::vector<double>{1.1, 1.2, 1.3});

    Report rep;
    rep.routing = ro;
    const ExpertModel m = build_expert_model(rep);
    REQUIRE(m.layers.size() == 2);
    CHECK(m.layers[1].at(0, 0) == Approx(4.0f));  // step 1 of layer 3: all 40 choices on expert 0
    CHECK(m.layers[1].at(1, 0) == Approx(0.0f));
    CHECK(m.layers[0].at(0, 1) == Approx(2.0f));
    CHECK(m.layers[1].max_load == Approx(4.0f));
    CHECK(m.ranks.empty());  // no ep: no per-rank expert times
}

TEST_CASE("experts: a trace that starts after step 1 (a capture) keeps all its steps steady, as every figure does",
          "[cpu][viewmodel][moe]") {
    TraceStore store;
    SyntheticRank r(0);
    const double counts[2][2] = {{30, 10}, {20, 20}};  // steps 5 and 6, 2 experts
    for (int step = 5; step <= 6; ++step)
        for (int e = 0; e < 2; ++e) r.counter(step, fmt::format("moe.layer0.expert{}", e), counts[step - 5][e], step);
    for (const auto& c : r.chunks("{}")) store.add_chunk(c);
    store.finalize();
    const ExpertRouting ro = analyze_expert_routing(store);
    REQUIRE(ro.layers.size() == 1);
    CHECK(ro.layers[0].imbalance_max == Approx(1.5));  // step 5's 30 of 40 against 20 a expert: counted
    CHECK(ro.layers[0].share[0] == Approx(50.0 / 80));
}

TEST_CASE("training curves: the slowest rank's step time, the report's throughput, MFU over the peaks",
          "[cpu][viewmodel]") {
    // two data-parallel ranks; rank 1 is slower at step 1, rank 0 at step 2
    const double ms[2][2] = {{100, 110}, {120, 90}};
    TraceStore store;
    for (int rank = 0; rank < 2; ++rank) {
        SyntheticRank r(rank, 2);
        for (int step = 1; step <= 2; ++step) {
            r.counter(step * 200.0, "step_ms", ms[rank][step - 1], step);
            r.counter(step * 200.0, "loss", 5.0 - step, step);
            r.counter(step * 200.0, "tokens_per_s", 1.0, step);  // a rank's own figure: not what the curve shows
        }
        for (const auto& c : r.chunks(metadata(rank, 2, rank, 0, 1, 1, /*peak GFLOP/s*/ 100))) store.add_chunk(c);
    }
    store.finalize();
    const std::vector<TrainingPoint> pts = build_training_series(store);
    REQUIRE(pts.size() == 2);
    const double tokens = 2 * 4 * 32;  // dp x batch x seq
    const predict::Prediction p =
        predict::predict(predict::PredictInput::from_config(store.run_rank_metadata().settings.value()));
    for (int i = 0; i < 2; ++i) {
        const double slowest = std::max(ms[0][i], ms[1][i]);
        CHECK(pts[size_t(i)].step == i + 1);
        CHECK(pts[size_t(i)].loss == Approx(4.0 - i));
        CHECK(pts[size_t(i)].step_ms == Approx(slowest));
        CHECK(pts[size_t(i)].tokens_per_s == Approx(tokens / (slowest / 1e3)));
        CHECK(pts[size_t(i)].mfu == Approx(tokens / (slowest / 1e3) * p.flops_per_token / 200e9));
    }
}

TEST_CASE("run summaries take the largest rank's memory and the report's throughput", "[cpu][viewmodel]") {
    TraceStore store;
    for (int rank = 0; rank < 2; ++rank) {
        SyntheticRank r(rank, 2);
        r.step(0, 200, 1);
        r.step(200, 300 + 20 * rank, 2);
        r.op(210, 250, 2);
        r.comm(240, 260, 2);  // half of it under the op
        r.memory(205, MemCategory::activations, 1000 * (rank + 1), 1000 * (rank + 1), prof::Phase::forward, 2);
        for (const auto& c : r.chunks(metadata(rank, 2, rank, 0, 1, 1, 100))) store.add_chunk(c);
    }
    store.finalize();
    const Report rep = build_report(store);
    const RunSummary s = summarize_run(rep, "run 1", "t.ustrace", 3.5);
    CHECK(s.label == "run 1");
    CHECK(s.status == "ok");
    CHECK(s.peak_total == 2000);  // rank 1's
    CHECK(s.peak_bytes[size_t(MemCategory::activations)] == 2000);
    CHECK(s.step_ms == Approx(rep.throughput.step_s * 1e3));
    CHECK(s.step_ms == Approx(120.0));  // the slowest rank's steady step
    CHECK(s.tokens_per_s == Approx(rep.throughput.tokens_per_s));
    CHECK(s.mfu == Approx(rep.throughput.mfu));
    CHECK(s.overlap_pct == Approx(50.0));
    CHECK(s.final_loss == 3.5);
}

TEST_CASE("timeline: a GPU's streams get rows of their own, drawn as one sub-lane per stream", "[cpu][viewmodel]") {
    SyntheticRank r(0);
    // Stream 0: a kernel; stream 3: two kernels, one overlapping stream 0's; stream 0 again, overlapping stream 3's.
    r.kernel(0.0, 1.0, 0, "gemm_a");
    r.kernel(0.5, 1.5, 3, "gemm_b");
    r.kernel(2.0, 3.0, 3, "gemm_c");
    r.kernel(2.5, 3.5, 0, "gemm_d");
    TraceStore s;
    load(s, r, "{}");
    const LaneTrack& lane = s.rank(0)->lanes[size_t(Lane::device)];
    REQUIRE(lane.rows_by_thread());
    // First-fit alone would put gemm_c into row 0 (free at 2.0) beside stream 0's kernels; by stream it may not.
    REQUIRE(lane.rows() == 2);
    for (int row = 0; row < lane.rows(); ++row)
        for (uint32_t i : lane.row(row)) CHECK(lane.spans()[i].thread == lane.row_thread(row));
    const auto groups = rows_by_thread(lane, 4);
    REQUIRE(groups.size() == 2);
    CHECK(groups[0].thread == 0);
    CHECK(groups[1].thread == 3);
    // Drawing stream 3's sub-lane yields its two kernels, on the sub-lane's first row.
    std::vector<TimelineItem> items;
    build_lane_items(lane, TimeWindow{0, 4000000, 1000}, 3.0f, items, &groups[1].rows);
    REQUIRE(items.size() == 2);
    for (const auto& it : items) {
        CHECK(it.row == 0);
        CHECK(it.span->thread == 3);
    }
}

TEST_CASE("the Ranks heatmap: a figure per rank and step, grouped by a coordinate, sorted, the blamed marked",
          "[cpu][viewmodel]") {
    // 4 ranks on a dp 2 x pp 2 grid, steps 1 and 2; rank r computes r + step tenths of a second
    std::vector<RankDigest> digests;
    for (int r = 0; r < 4; ++r) {
        RankDigest d;
        d.rank = r;
        d.label = "rank " + std::to_string(r);
        d.coords = {.dp = r % 2, .pp = r / 2};
        for (int step = 1; step <= 2; ++step) {
            DigestStep s;
            s.step = step, s.compute_s = 0.1 * (r + step), s.idle_s = 0.01 * r;
            d.steps.push_back(s);
        }
        digests.push_back(d);
    }
    Blame b;
    b.waits = {{3, 2, 0.5, 0.0}, {0, 2, 0.0, 0.2}, {1, 2, 0.0, 0.3}};
    Straggler s;
    s.rank = 3, s.stands_out = true;
    b.stragglers.push_back(s);

    RanksModel m = build_ranks_model(digests, b, RankFigure::compute, "", RankOrder::rank);
    REQUIRE(m.steps == std::vector<int>{1, 2});
    REQUIRE(m.rows == std::vector<size_t>{0, 1, 2, 3});
    CHECK(m.at(2, 1) == Approx(0.4));
    CHECK(m.max_value == Approx(0.5));
    CHECK(m.marks.at(3) == "holds the run back");
    CHECK(m.groupings == std::vector<std::string>{"", "dp", "pp"});

    // grouped by pipeline stage, the figure most first within each stage
    m = build_ranks_model(digests, b, RankFigure::compute, "pp", RankOrder::value);
    CHECK(m.rows == std::vector<size_t>{1, 0, 3, 2});
    CHECK(m.group_starts == std::vector<size_t>{0, 2});
    CHECK(m.group_labels == std::vector<std::string>{"pp 0", "pp 1"});

    // waits come from the blame; a step without waiting is 0, not missing
    m = build_ranks_model(digests, b, RankFigure::suffered, "", RankOrder::value);
    CHECK(m.rows.front() == 1);
    CHECK(m.at(0, 1) == Approx(0.3));
    CHECK(m.at(0, 0) == Approx(0.0));
    m = build_ranks_model(digests, b, RankFigure::caused, "dp", RankOrder::caused);
    CHECK(m.rows == std::vector<size_t>{0, 2, 3, 1});  // dp 0: ranks 0, 2 (none caused); dp 1: rank 3 first

    // the wait for a core: a step whose figure is unknown (-1) stays blank, not 0
    for (RankDigest& d : digests) d.steps[1].core_wait_s = 0.02 * d.rank;
    m = build_ranks_model(digests, b, RankFigure::core_wait, "", RankOrder::value);
    CHECK(m.rows.front() == 3);
    CHECK(m.at(0, 1) == Approx(0.06));
    CHECK(m.at(0, 0) < 0);
    CHECK(m.totals.front() == Approx(0.06));
}
