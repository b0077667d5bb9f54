// The inter-node link as a data-parallel run's gradient all-reduce saw it (app/plan/calibration.h,
// dp_all_reduce_bandwidth): what `ultrascope calibrate --nodes N` writes to the machine file.
#include "app/plan/calibration.h"
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
