// The inter-node link as training's transfers see it, measured from runs of the engine (app/plan/calibration.h; what
// `ultrascope calibrate --nodes N` writes to the machine file) and priced by the planner: the gradient buckets'
// bandwidth (dp_all_reduce_bandwidth, ClusterDesc::inter_node_bucket_bandwidth), blocking collectives' bandwidth
// (tp_all_reduce_bandwidth, the inter_node link) and the slowdown of compute beside hidden transfers
// (overlap_slowdown, ClusterDesc::inter_node_overlap_slowdown).
#include "app/plan/calibration.h"
#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/model_desc.h"
#include "app/plan/planner.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us;
using prof::GroupKind;
using prof::Lane;
using prof::OpClass;
using prof::SpanKind;

namespace {

// A dp all-reduce bucket of `bytes` on this rank, in milliseconds.
void bucket(test::SyntheticRank& r, double begin_ms, double end_ms, uint64_t bytes, int step) {
    r.span(Lane::comm, SpanKind::comm, begin_ms, end_ms, "all_reduce dp", step, OpClass::all_reduce);
    r.last_span().group = uint8_t(GroupKind::dp);
    r.last_span().bytes = bytes;
}

// A collective of `bytes` on this rank in group `group`, in milliseconds.
void collective(test::SyntheticRank& r, double begin_ms, double end_ms, uint64_t bytes, int step, GroupKind group) {
    r.span(Lane::comm, SpanKind::comm, begin_ms, end_ms, "all_reduce", step, OpClass::all_reduce);
    r.last_span().group = uint8_t(group);
    r.last_span().bytes = bytes;
}

prof::TraceStore store_of(const test::SyntheticRank& a, const test::SyntheticRank& b) {
    prof::TraceStore store;
    for (const auto* r : {&a, &b})
        for (const auto& c : r->chunks(test::metadata(r == &a ? 0 : 1, 2, r == &a ? 0 : 1, 0, 1))) store.add_chunk(c);
    store.finalize();
    return store;
}

// One step of a GEMM forward of `forward_ms`, then a backward GEMM of the same FLOPs of `backward_ms`, and a dp
// collective from `comm_at` to `comm_end` (ms into the step).
struct StepShape {
    double forward_ms, backward_ms, comm_at, comm_end;
};

// Two ranks running steps 1..5: the odd ones shaped `overlapped`, the even ones `blocking` (--overlap-alternate).
prof::TraceStore alternating_run(StepShape overlapped, StepShape blocking) {
    test::SyntheticRank a(0, 2), b(1, 2);
    for (int step = 1; step <= 5; ++step) {
        const double t = 1000.0 * step;
        const StepShape& k = step % 2 ? overlapped : blocking;
        for (auto* r : {&a, &b}) {
            r->step(t, t + 500, step);
            r->span(Lane::compute, SpanKind::op, t, t + k.forward_ms, "c_fc", step, OpClass::gemm, 1'000'000'000);
            r->span(Lane::compute, SpanKind::op, t + k.forward_ms, t + k.forward_ms + k.backward_ms, "c_fc dW", step,
                    OpClass::gemm, 1'000'000'000);
            collective(*r, t + k.comm_at, t + k.comm_end, 4'000'000, step, GroupKind::dp);
        }
    }
    return store_of(a, b);
}

}  // namespace

TEST_CASE("calibration: a tp run's blocking all-reduces give the bandwidth of the rank that waited least, the median",
          "[planner]") {
    test::SyntheticRank a(0, 2), b(1, 2);
    const uint64_t mib = 1 << 20;
    // per call, the shorter rank: step 2 takes 8, 8, 10 ms, step 3 8, 16, 8 ms; the median of the six is 8 ms
    const double a_ms[2][3] = {{12, 8, 10}, {9, 16, 30}}, b_ms[2][3] = {{8, 9, 11}, {8, 20, 8}};
    for (int step = 1; step <= 3; ++step) {
        const double t = 1000.0 * step;
        a.step(t, t + 900, step), b.step(t, t + 900, step);
        for (int k = 0; k < 3; ++k) {
            const double at = t + 100.0 * k;
            // step 1 (set-up) is slow and not used
            collective(a, at, at + (step == 1 ? 90 : a_ms[step - 2][k]), mib, step, GroupKind::tp);
            collective(b, at, at + (step == 1 ? 90 : b_ms[step - 2][k]), mib, step, GroupKind::tp);
        }
        // small ones (a loss, the vocabulary's max) and other groups' are not the blocking link's
        collective(a, t + 400, t + 401, 4096, step, GroupKind::tp);
        collective(a, t + 500, t + 900, mib, step, GroupKind::dp);
    }
    CHECK(plan::tp_all_reduce_bandwidth(store_of(a, b)) == Approx(double(mib) / 0.008));
    // no tensor parallelism: none
    CHECK(plan::tp_all_reduce_bandwidth(alternating_run({10, 20, 30, 80}, {10, 20, 30, 80})) == 0);
}

TEST_CASE("calibration: compute beside hidden transfers, a run's overlapped steps against its others", "[planner]") {
    // without overlap: forward 10 ms, backward 20 ms, then the collective; overlapped: the backward took 25 ms with
    // the collective under all of it, so a fifth of the time beside it was extra
    const StepShape blocking{10, 20, 30, 80};
    CHECK(plan::overlap_slowdown(alternating_run({10, 25, 10, 80}, blocking)) == Approx(0.2));
    // the machine twice as fast in the overlapped steps (their forward in 5 ms): the backward's 20 ms are 10 ms
    // there, and 12.5 ms beside the collective is the same fifth
    CHECK(plan::overlap_slowdown(alternating_run({5, 12.5, 5, 80}, blocking)) == Approx(0.2));
    // no slower beside it: none; faster (noise) is not a speed-up
    CHECK(plan::overlap_slowdown(alternating_run({10, 20, 10, 80}, blocking)) == Approx(0).margin(1e-9));
    CHECK(plan::overlap_slowdown(alternating_run({10, 15, 10, 80}, blocking)) == 0);
    // only half of the backward under the collective: not counted, nothing measured; a run that never overlapped
    CHECK(plan::overlap_slowdown(alternating_run({10, 30, 25, 80}, blocking)) == -1);
    CHECK(plan::overlap_slowdown(alternating_run(blocking, blocking)) == -1);
}

TEST_CASE("calibration: a dp run's buckets give the bandwidth from the last rank's start to the last end",
          "[planner]") {
    test::SyntheticRank a(0, 2), b(1, 2);
    for (int step = 1; step <= 3; ++step) {
        const double t = 1000.0 * step;
        a.step(t, t + 900, step), b.step(t, t + 900, step);
        // rank 1 starts 10 ms after rank 0; two 4 MB buckets one after another, done at +110 ms (step 3: +210 ms)
        const double done = step == 3 ? 210 : 110;
        bucket(a, t + 0, t + 60, 4'000'000, step);
        bucket(a, t + 60, t + done, 4'000'000, step);
        bucket(b, t + 10, t + 60, 4'000'000, step);
        bucket(b, t + 60, t + done - 1, 4'000'000, step);
        // the loss's 8-byte all-reduce is no bucket, and world-group collectives are not the dp link's
        bucket(a, t + 300, t + 301, 8, step);
        a.span(Lane::comm, SpanKind::comm, t + 400, t + 800, "all_reduce world", step, OpClass::all_reduce);
        a.last_span().bytes = 4'000'000;
    }
    prof::TraceStore store;
    for (const auto* r : {&a, &b})
        for (const auto& c : r->chunks(test::metadata(r == &a ? 0 : 1, 2, r == &a ? 0 : 1, 0, 1))) store.add_chunk(c);
    store.finalize();
    // Step 1 is set-up and not used; step 2: the ring of 2 sends 2 x 1/2 x 8 MB over 110 - 10 = 100 ms.
    CHECK(plan::dp_all_reduce_bandwidth(store) == Approx(8e6 / 0.100));
}

TEST_CASE("calibration: a run without data-parallel buckets gives no bandwidth", "[planner]") {
    test::SyntheticRank a(0, 2), b(1, 2);
    for (int step = 1; step <= 3; ++step) {
        a.step(100.0 * step, 100.0 * step + 90, step), b.step(100.0 * step, 100.0 * step + 90, step);
        a.op(100.0 * step, 100.0 * step + 80, step), b.op(100.0 * step, 100.0 * step + 80, step);
    }
    prof::TraceStore store;
    for (const auto* r : {&a, &b})
        for (const auto& c : r->chunks(test::metadata(r == &a ? 0 : 1, 2, r == &a ? 0 : 1, 0, 1))) store.add_chunk(c);
    store.finalize();
    CHECK(plan::dp_all_reduce_bandwidth(store) == 0);
}

TEST_CASE("planner: gradient buckets across nodes at their own measured bandwidth, other collectives at the link's",
          "[planner][nodes]") {
    using namespace us::plan;
    using namespace us::predict;
    ClusterDesc c = load_cluster("h100-sxm");
    c.nodes = 2, c.gpus_per_node = 1;  // one rank a node: dp 2 and tp 2 both cross the link
    c.inter_node = {c.intra_node.bandwidth / 100, c.intra_node.latency * 10};
    const ModelDesc m = engine_preset_model("small");
    Layout dp;
    dp.parallel.dp = 2, dp.parallel.overlap = false;  // every bucket exposed: the step moves with their bandwidth
    Layout tp;
    tp.parallel.tp = 2;
    const double dp_link = evaluate(m, c, dp).time.step_s, tp_link = evaluate(m, c, tp).time.step_s;
    c.inter_node_bucket_bandwidth = c.inter_node.bandwidth / 2;
    CHECK(evaluate(m, c, dp).time.step_s > dp_link);
    CHECK(evaluate(m, c, tp).time.step_s == Approx(tp_link));  // tp's blocking collectives keep the link's
    // inside one node the buckets take the node's link, whatever was measured between nodes
    ClusterDesc one = c;
    one.nodes = 1, one.gpus_per_node = 2;
    ClusterDesc one_plain = one;
    one_plain.inter_node_bucket_bandwidth = 0;
    CHECK(evaluate(m, one, dp).time.step_s == Approx(evaluate(m, one_plain, dp).time.step_s));
    // the field survives the machine file; a negative one is refused, naming it
    CHECK(cluster_from_json(cluster_to_json(c), "t").inter_node_bucket_bandwidth == c.inter_node_bucket_bandwidth);
    nlohmann::json bad = cluster_to_json(c);
    bad["inter_node_bucket_bandwidth"] = -1;
    CHECK_THROWS_WITH(cluster_from_json(bad, "m.json"), Catch::Contains("'inter_node_bucket_bandwidth'"));
}

TEST_CASE("planner: compute beside transfers hidden across nodes runs slower by the measured fraction, inside none",
          "[planner][nodes]") {
    using namespace us::plan;
    using namespace us::predict;
    ClusterDesc c = load_cluster("h100-sxm");
    c.nodes = 2, c.gpus_per_node = 1;
    c.overlap_slowdown = 0;
    c.inter_node = {c.intra_node.bandwidth / 100, c.intra_node.latency * 10};
    const ModelDesc m = engine_preset_model("small");
    Layout dp;
    dp.parallel.dp = 2;
    Layout tp;
    tp.parallel.tp = 2;
    const StepPieces before = evaluate(m, c, dp).time;
    REQUIRE(before.dp_comm_hidden_s > 0);
    CHECK(before.overlap_slowdown_s == 0);
    c.inter_node_overlap_slowdown = 0.4;
    const StepPieces after = evaluate(m, c, dp).time;
    CHECK(after.overlap_slowdown_s == Approx(0.4 * after.dp_comm_hidden_s));
    CHECK(after.step_s == Approx(before.step_s + after.overlap_slowdown_s));
    // tp's collectives block (nothing hidden): no change
    ClusterDesc plain = c;
    plain.inter_node_overlap_slowdown = -1;
    CHECK(evaluate(m, c, tp).time.step_s == Approx(evaluate(m, plain, tp).time.step_s));
    // inside one node the node's own figure (0 here) holds
    ClusterDesc one = c;
    one.nodes = 1, one.gpus_per_node = 2;
    CHECK(evaluate(m, one, dp).time.overlap_slowdown_s == 0);
    // the field survives the machine file, absent when unmeasured; out of [0, 1) is refused, naming it
    CHECK(cluster_from_json(cluster_to_json(c), "t").inter_node_overlap_slowdown == 0.4);
    CHECK_FALSE(cluster_to_json(plain).contains("inter_node_overlap_slowdown"));
    CHECK(cluster_from_json(cluster_to_json(plain), "t").inter_node_overlap_slowdown < 0);
    nlohmann::json bad = cluster_to_json(c);
    bad["inter_node_overlap_slowdown"] = 1.5;
    CHECK_THROWS_WITH(cluster_from_json(bad, "m.json"), Catch::Contains("'inter_node_overlap_slowdown'"));
}

TEST_CASE("planner: blocking transfers in a backward share their link with the gradient buckets flowing on it",
          "[planner][nodes]") {
    using namespace us::plan;
    using namespace us::predict;
    ClusterDesc c = load_cluster("h100-sxm");
    c.nodes = 2, c.gpus_per_node = 1;  // one rank a node: cp's ring and the gradient buckets both cross the link
    c.inter_node = {c.intra_node.bandwidth / 100, c.intra_node.latency * 10};
    const ModelDesc m = engine_preset_model("small");
    Layout cp;
    cp.parallel.cp = 2, cp.micro_batch = 4;
    const RankShapes r = rank_shapes(m, cp, 0);
    const StageCost alone = stage_cost(m, c, cp, r), shared = stage_cost(m, c, cp, r, {kLinkInter, 2.0});
    CHECK(shared.cp_exposed_b > alone.cp_exposed_b);
    CHECK(shared.cp_exposed_f == alone.cp_exposed_f);  // the buckets flow in the backward only
    CHECK(shared.cp_hidden == alone.cp_hidden);        // the link's bytes are the same
    CHECK(stage_cost(m, c, cp, r, {kLinkIntra, 2.0}).cp_exposed_b == alone.cp_exposed_b);
    Layout tp;
    tp.parallel.tp = 2;
    const RankShapes t = rank_shapes(m, tp, 0);
    CHECK(stage_cost(m, c, tp, t, {kLinkInter, 2.0}).tp_b == Approx(2 * stage_cost(m, c, tp, t).tp_b));
    // In the step the longer backward is waited for, at most for as long as the buckets flow in it: exactly that
    // beyond the data-parallel model's own exposure
    const DpCost d = dp_cost(m, c, cp, r, alone);
    REQUIRE(d.backward_traffic > 0);
    const double longer = shared.backward() - alone.backward();
    CHECK(evaluate(m, c, cp).time.dp_comm_exposed_s ==
          Approx(d.exposed + std::min(longer, d.backward_traffic)).epsilon(1e-9));
    ClusterDesc quick = c;  // buckets that cross sooner than the backward lengthens: only while they flow
    quick.inter_node_bucket_bandwidth = c.inter_node.bandwidth * 1e4;
    const DpCost q = dp_cost(m, quick, cp, r, alone);
    REQUIRE(q.backward_traffic < longer);
    CHECK(evaluate(m, quick, cp).time.dp_comm_exposed_s == Approx(q.exposed + q.backward_traffic).epsilon(1e-9));
    // no buckets in the backward (no overlap: they flow after it): no sharing
    Layout after = cp;
    after.parallel.overlap = false;
    CHECK(dp_cost(m, c, after, r, alone).backward_traffic == 0);
}
