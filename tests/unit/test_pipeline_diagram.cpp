// The pipeline schedule diagrams of the timeline view: the theory from the run's schedule list, and a measured step
// from the F/B/W phase spans of the first data-parallel replica, both normalised to the pipeline's window.
#include "app/gui/model/pipeline_diagram_model.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us;
using namespace us::gui;
using namespace us::prof;
using namespace us::test;

TEST_CASE("schedule diagram: the theory is the run's schedule simulated, one row per stage", "[cpu][viewmodel]") {
    predict::PredictInput run;
    run.parallel.pp = 2, run.grad_accum = 4, run.parallel.pp_schedule = PipelineSchedule::one_f_one_b;
    const PipelineDiagram d = theory_diagram(run);
    REQUIRE(d.stages == 2);
    CHECK(d.boxes.size() == 16);  // 4 F and 4 B per stage
    REQUIRE(d.bubble.size() == 2);
    CHECK(d.bubble[0] == Approx(0.25));  // (pp - 1) / m
    CHECK(d.caption.find("predicted") != std::string::npos);
    for (const DiagramBox& b : d.boxes) {
        CHECK(b.start >= 0.0);
        CHECK(b.end <= 1.0 + 1e-12);
        CHECK(b.end > b.start);
    }
    run.parallel.pp_schedule = PipelineSchedule::zb1;
    const PipelineDiagram zb = theory_diagram(run);
    CHECK(zb.boxes.size() == 24);             // F, B and W
    CHECK(zb.bubble[0] == Approx(1.0 / 12));  // (pp - 1) / (3 m)
    run.parallel.pp = 1;
    CHECK(theory_diagram(run).stages == 0);
    run.parallel.pp = 4, run.parallel.pp_schedule = PipelineSchedule::interleaved, run.parallel.pp_chunks = 2,
    run.grad_accum = 3;  // m not a multiple of pp
    CHECK(theory_diagram(run).stages == 0);
}

TEST_CASE("schedule diagram: a measured GPipe step, normalised to the pipeline's window", "[cpu][viewmodel]") {
    // pp 2, m 2, forward 10 ms and backward 20 ms; stage 1 starts 10 ms late and stage 0 ends at 90 ms.
    SyntheticRank s0(0, 2), s1(1, 2);
    s0.step(0, 100, 1);
    s1.step(0, 100, 1);
    auto phase = [](SyntheticRank& r, const char* name, double b, double e, int mb) {
        r.span(Lane::compute, SpanKind::phase, b, e, name, 1, OpClass::none, 0, mb);
        r.op(b, e);  // the ops inside the phase
    };
    phase(s0, "F", 0, 10, 0), phase(s0, "F", 10, 20, 1), phase(s0, "B", 50, 70, 0), phase(s0, "B", 70, 90, 1);
    phase(s1, "F", 10, 20, 0), phase(s1, "F", 20, 30, 1), phase(s1, "B", 30, 50, 0), phase(s1, "B", 50, 70, 1);
    TraceStore store;
    load(store, s0, metadata(0, 2, 0, 0, 2, 2));
    load(store, s1, metadata(1, 2, 0, 1, 2, 2));
    const Report rep = build_report(store);
    const PipelineDiagram d = measured_diagram(store, rep, 1);
    REQUIRE(d.stages == 2);
    REQUIRE(d.boxes.size() == 8);
    CHECK(d.window_ns == Approx(90e6));
    CHECK(d.caption.find("measured") != std::string::npos);
    // stage 1's first forward starts at 10 of 90 ms; its last backward ends at 70
    bool found = false;
    for (const DiagramBox& b : d.boxes)
        if (b.stage == 1 && b.op == PipeOp::forward && b.micro_batch == 0) {
            CHECK(b.start == Approx(10.0 / 90));
            CHECK(b.end == Approx(20.0 / 90));
            found = true;
        }
    CHECK(found);
    // idle in the window over busy time: stage 0 is busy 60 of 90 ms, stage 1 60 of 90 ms
    CHECK(d.bubble[0] == Approx(30.0 / 60));
    CHECK(d.bubble[1] == Approx(30.0 / 60));
    CHECK(measured_diagram(store, rep, 2).stages == 0);  // no such step
}

TEST_CASE("schedule diagram: with W spans, B is the input-gradient half", "[cpu][viewmodel]") {
    SyntheticRank s0(0, 2), s1(1, 2);
    for (SyntheticRank* r : {&s0, &s1}) r->step(0, 10, 1);
    s0.span(Lane::compute, SpanKind::phase, 0, 1, "F", 1, OpClass::none, 0, 0);
    s0.span(Lane::compute, SpanKind::phase, 3, 4, "B", 1, OpClass::none, 0, 0);
    s0.span(Lane::compute, SpanKind::phase, 4, 5, "W", 1, OpClass::none, 0, 0);
    s1.span(Lane::compute, SpanKind::phase, 1, 2, "F", 1, OpClass::none, 0, 0);
    s1.span(Lane::compute, SpanKind::phase, 2, 3, "B", 1, OpClass::none, 0, 0);
    s1.span(Lane::compute, SpanKind::phase, 3, 4, "W", 1, OpClass::none, 0, 0);
    TraceStore store;
    load(store, s0, metadata(0, 2, 0, 0, 2, 1, 100, "zb1"));
    load(store, s1, metadata(1, 2, 0, 1, 2, 1, 100, "zb1"));
    const PipelineDiagram d = measured_diagram(store, build_report(store), 1);
    REQUIRE(d.boxes.size() == 6);
    int inputs = 0, weights = 0;
    for (const DiagramBox& b : d.boxes) {
        inputs += b.op == PipeOp::backward_input;
        weights += b.op == PipeOp::backward_weight;
        CHECK(b.op != PipeOp::backward);
    }
    CHECK(inputs == 2);
    CHECK(weights == 2);
}
