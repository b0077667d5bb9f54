// The inter-node link's bandwidth for gradient buckets: measured from a data-parallel run's all-reduce
// (app/plan/calibration.h, dp_all_reduce_bandwidth; what `ultrascope calibrate --nodes N` writes to the machine file)
// and priced by the planner for the buckets alone (ClusterDesc::inter_node_bucket_bandwidth).
#include "app/plan/calibration.h"
#include "app/plan/cluster_desc.h"
#include "app/plan/model_desc.h"
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

}  // namespace

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
    ClusterDesc c = load_cluster("h100-sxm");
    c.nodes = 2, c.gpus_per_node = 1;  // one rank a node: dp 2 and tp 2 both cross the link
    c.inter_node = {c.intra_node.bandwidth / 100, c.intra_node.latency * 10};
    const ModelDesc m = engine_preset_model("small");
    Layout dp;
    dp.dp = 2, dp.overlap = false;  // every bucket exposed: the step moves with their bandwidth
    Layout tp;
    tp.tp = 2;
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
