// The op table (op_table.h): per name, calls, self time (nested ops taken out of their parents) and FLOPs over
// the steady steps, on a synthetic trace whose answers are known; the report's text and JSON carry it.
#include "profiler/analysis/op_table.h"
#include "profiler/analysis/report.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us;
using us::test::SyntheticRank;

namespace {

// Three steps of 10 ms. Each: a GEMM "fc" [1, 4) with 300 MFLOP, an "attention" [4, 9) holding a nested "rope"
// [4, 5) and a nested "fc" [6, 7) (a sub-GEMM), all on thread 0. Step 1 is the warm-up the table leaves out;
// its fc is 10x slower.
SyntheticRank three_steps() {
    SyntheticRank r(0);
    for (int step = 1; step <= 3; ++step) {
        const double t = 10.0 * (step - 1);
        r.step(t, t + 10, step);
        r.span(prof::Lane::compute, prof::SpanKind::op, t + 1, t + (step == 1 ? 9.9 : 4), "fc", step,
               prof::OpClass::gemm, 300'000'000);
        if (step == 1) continue;
        r.span(prof::Lane::compute, prof::SpanKind::op, t + 4, t + 9, "attention", step, prof::OpClass::attention,
               500'000'000);
        r.span(prof::Lane::compute, prof::SpanKind::op, t + 4, t + 5, "rope", step, prof::OpClass::attention);
        r.span(prof::Lane::compute, prof::SpanKind::op, t + 6, t + 7, "fc", step, prof::OpClass::gemm, 100'000'000);
    }
    return r;
}

const prof::OpRow& row(const prof::OpTable& t, const std::string& name) {
    for (const auto& r : t.rows)
        if (r.name == name) return r;
    FAIL("no row " << name);
    return t.rows.front();
}

}  // namespace

TEST_CASE("op table: self time takes nested ops out, FLOPs and calls sum over the steady steps", "[cpu][analysis]") {
    prof::TraceStore store;
    us::test::load(store, three_steps(), us::test::metadata(0, 1, 0, 0, 1));
    const auto steps = prof::analyze_steps(store, 0);
    REQUIRE(steps.size() == 3);
    const prof::OpTable t = prof::op_table(store, 0, prof::steady_steps(steps));
    CHECK(t.steps == 2);
    CHECK(t.wall_s == Approx(0.020));
    REQUIRE(t.rows.size() == 3);
    const prof::OpRow& fc = row(t, "fc");
    CHECK(fc.calls == 4);                             // two per steady step: the top-level and the nested one
    CHECK(fc.self_s == Approx(2 * (0.003 + 0.001)));  // step 1's slow call is not in
    CHECK(fc.flops == 2 * 400'000'000ull);
    CHECK(fc.longest_s == Approx(0.003));
    const prof::OpRow& attention = row(t, "attention");
    CHECK(attention.self_s == Approx(2 * 0.003));  // 5 ms less the nested rope and fc
    CHECK(attention.total_s == Approx(2 * 0.005));
    CHECK(prof::OpTable::flop_rate(attention) == Approx(500e6 / 0.005));  // FLOPs over the whole span
    CHECK(row(t, "rope").flops == 0);
    CHECK(t.self_s() == Approx(2 * 0.008));  // the rows add up to the compute time: nothing counted twice
    CHECK(t.rows.front().name == "fc");      // most self time first
    CHECK(t.rows.back().name == "rope");
}

TEST_CASE("op table: a span that outlives its parent takes only the overlap, and threads do not nest",
          "[cpu][analysis]") {
    SyntheticRank r(0);
    r.step(0, 10, 1);
    r.step(10, 20, 2);
    r.span(prof::Lane::compute, prof::SpanKind::op, 11, 15, "a", 2, prof::OpClass::gemm);
    r.span(prof::Lane::compute, prof::SpanKind::op, 14, 17, "b", 2, prof::OpClass::norm);
    // A kernel on another stream inside a's time is not a's child.
    r.span(prof::Lane::compute, prof::SpanKind::op, 12, 13, "c", 2, prof::OpClass::norm);
    prof::TraceStore store;
    auto chunks = r.chunks(us::test::metadata(0, 1, 0, 0, 1));
    chunks[1].events.back().span.thread = 1;
    for (const auto& c : chunks) store.add_chunk(c);
    store.finalize();
    const prof::OpTable t = prof::op_table(store, 0, prof::steady_steps(prof::analyze_steps(store, 0)));
    CHECK(row(t, "a").self_s == Approx(0.003));  // 4 ms less the 1 ms b overlaps
    CHECK(row(t, "b").self_s == Approx(0.003));
    CHECK(row(t, "c").self_s == Approx(0.001));
}

TEST_CASE("op table: kernel names lose their namespaces and type-only template arguments, and are cut to fit",
          "[cpu][analysis]") {
    // template arguments that are only types say nothing a reader needs (common/core/kernel_names.h)
    CHECK(prof::short_op_name("us::cuda::(anonymous namespace)::adamw_kernel<float>", 40) == "adamw_kernel");
    CHECK(prof::short_op_name("ns::k<a::b, c::d<e::f>>", 40) == "k");
    CHECK(prof::short_op_name(
              "us::cuda::(anonymous namespace)::causal_softmax_backward_kernel<__nv_bfloat16, __nv_bfloat16>", 40) ==
          "causal_softmax_backward_kernel");
    CHECK(prof::short_op_name("nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_TNT", 20) == "nvjet_sm90_tss_25...");
    CHECK(prof::short_op_name("mlp.c_fc dW", 44) == "mlp.c_fc dW");
}

TEST_CASE("the report prints the busiest rank's op table and writes every rank's in its JSON", "[cpu][analysis]") {
    prof::TraceStore store;
    us::test::load(store, three_steps(), us::test::metadata(0, 1, 0, 0, 1));
    const prof::Report rep = prof::build_report(store);
    const std::string text = prof::format_report(rep);
    CHECK_THAT(text, Catch::Matchers::Contains("Where the compute goes on rank 0"));
    CHECK_THAT(text, Catch::Matchers::Contains("attention FLOPs count the whole s x s square"));
    const auto j = prof::report_json(rep);
    const auto& ops = j["ranks"][0]["ops"];
    CHECK(ops["steps"] == 2);
    REQUIRE(ops["rows"].size() == 3);
    CHECK(ops["rows"][0]["name"] == "fc");
    CHECK(ops["rows"][0]["calls_per_step"].get<double>() == Approx(2.0));
    CHECK(ops["rows"][0]["self_s_per_step"].get<double>() == Approx(0.004));
    CHECK(ops["rows"][0]["flops_per_step"].get<double>() == Approx(400e6));
}
