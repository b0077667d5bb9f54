// Pipelines of imported runs (profiler/analysis/pipeline_stages.h, imported_run.h): stages from the sends and
// receives, ordered by the forward direction, each stage's bubble per step by hand, (p - 1) / m only with m.
#include "profiler/analysis/imported_run.h"
#include "profiler/analysis/pipeline_stages.h"
#include "profiler/analysis/report.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us::prof;
using us::test::SyntheticRank;

namespace {

struct Transfer {
    double begin, end;
    OpClass op;
    int peer;
};

// A CPU-only rank of an imported run: compute ops and transfers (ms) in one step [0, 20).
void add_rank(TraceStore& store, int rank, const std::vector<std::pair<double, double>>& ops,
              const std::vector<Transfer>& transfers, const std::string& extra_meta = "") {
    SyntheticRank r(rank, 3);
    r.step(0, 20, 1);
    for (auto [b, e] : ops) r.op(b, e, 1);
    for (const Transfer& t : transfers)
        r.span(Lane::p2p, SpanKind::comm, t.begin, t.end, t.op == OpClass::send ? "send" : "recv", 1, t.op);
    std::vector<Chunk> chunks =
        r.chunks(fmt::format(R"({{"rank": {}, "world_size": 3, "source": "kineto"{}}})", rank, extra_meta));
    size_t next = 0;
    for (EventRecord& e : chunks[1].events)
        if (e.type == uint8_t(EventType::span) && e.span.lane == uint8_t(Lane::p2p))
            e.span.peer = int16_t(transfers[next++].peer);
    for (const Chunk& c : chunks) store.add_chunk(c);
}

// Stages 0 -> 1 -> 2, phases unknown: forward 0 sends at 4, 1 at 6.5; backward 2 sends at 11, 1 at 14.
TraceStore three_stages(const std::string& rank0_meta = "") {
    TraceStore store;
    add_rank(store, 0, {{0, 4}, {14.5, 18.5}}, {{4, 4.5, OpClass::send, 1}, {14, 14.5, OpClass::recv, 1}}, rank0_meta);
    add_rank(store, 2, {{7, 11}}, {{6.5, 7, OpClass::recv, 1}, {11, 11.5, OpClass::send, 1}});
    add_rank(store, 1, {{4.5, 6.5}, {11.5, 13.5}},
             {{4, 4.5, OpClass::recv, 0},
              {6.5, 7, OpClass::send, 2},
              {11, 11.5, OpClass::recv, 2},
              {14, 14.5, OpClass::send, 0}});
    store.finalize();
    return store;
}

}  // namespace

TEST_CASE("pipeline stages from sends and receives, with each stage's bubble", "[cpu][hta][pipeline-stages]") {
    const TraceStore store = three_stages();
    const PipelineStages p = pipeline_stages(store, 2);
    REQUIRE(p.pipelines.size() == 1);
    CHECK(p.pipelines[0] == std::vector<int>{0, 1, 2});
    CHECK(p.order_from.find("first transfer") != std::string::npos);
    REQUIRE(p.formula.has_value());
    CHECK(*p.formula == Approx(1.0));  // (3 - 1) / 2
    CHECK(p.microbatches_from == "--microbatches");
    REQUIRE(p.stages.size() == 3);
    const double expected_bubble_ms[] = {10.5, 5, 0};  // windows [0,18.5) [4.5,13.5) [7,11) less 8, 4, 4 ms of work
    const double expected_work_ms[] = {8, 4, 4};
    for (const PipelineStage& st : p.stages) {
        INFO("rank " << st.rank);
        CHECK(st.stage == st.rank);
        CHECK_FALSE(st.device);
        REQUIRE(st.steps.size() == 1);
        CHECK(st.steps[0].bubble_s * 1e3 == Approx(expected_bubble_ms[st.rank]).margin(1e-9));
        CHECK(st.steps[0].work_s * 1e3 == Approx(expected_work_ms[st.rank]));
        CHECK(st.steps[0].bubble_fraction == Approx(expected_bubble_ms[st.rank] / expected_work_ms[st.rank]));
    }
}

TEST_CASE("without m the formula is unknown, and m from the trace's annotations", "[cpu][hta][pipeline-stages]") {
    const PipelineStages unknown = pipeline_stages(three_stages());
    CHECK_FALSE(unknown.microbatches.has_value());
    CHECK_FALSE(unknown.formula.has_value());
    const nlohmann::json j = pipeline_stages_json(unknown);
    CHECK(j["bubble_fraction_formula"].is_null());
    CHECK(j["microbatches"].is_null());
    CHECK(j["source"] == "measured");

    const PipelineStages annotated = pipeline_stages(three_stages(R"(, "microbatches": 4)"));
    REQUIRE(annotated.formula.has_value());
    CHECK(*annotated.formula == Approx(0.5));
    CHECK(annotated.microbatches_from == "the trace's annotations");
}

TEST_CASE("an imported run's report: its own section, blame, the pipeline", "[cpu][hta][pipeline-stages]") {
    const TraceStore store = three_stages();
    CHECK(is_imported_run(store));
    const Report rep = build_report(store, 2);
    const nlohmann::json j = report_json(rep);
    REQUIRE(j["imported"].is_object());
    CHECK(j["imported"]["source"] == "measured");
    CHECK(j["imported"]["ranks"].size() == 3);
    CHECK_FALSE(j["imported"].contains("slowest_rank"));  // a step's length names no culprit: blame does
    REQUIRE(j["blame"]["pipelines"].size() == 1);
    CHECK(j["blame"]["pipelines"][0]["ranks"] == nlohmann::json::array({0, 1, 2}));
    CHECK(j["imported"]["pipeline"]["pipelines"][0] == nlohmann::json::array({0, 1, 2}));
    CHECK(j["imported"]["pipeline"]["bubble_fraction_formula"].get<double>() == Approx(1.0));
    CHECK(format_report(rep).find("Pipeline found from the sends and receives") != std::string::npos);
    for (const auto& r : j["ranks"]) CHECK_FALSE(r.contains("hta"));  // CPU-only ranks: no device spans

    TraceStore engine;
    SyntheticRank r(0);
    r.step(0, 1, 1);
    us::test::load(engine, r, R"({"rank": 0, "world_size": 1})");
    CHECK(report_json(build_report(engine))["imported"].is_null());
}

TEST_CASE("process groups are named through the run description", "[cpu][hta][pipeline-stages]") {
    RankTrace rt;
    rt.set_metadata(nlohmann::json::parse(
        R"({"source": "kineto", "run": {"process_groups": [{"name": "5", "desc": "mesh_dp", "kind": "dp", "group": 1},
                                {"name": "9", "desc": "custom_sub_group", "kind": "", "group": 11}]}})"));
    CHECK(process_group_name(rt, 1) == "5 (dp) mesh_dp");
    CHECK(process_group_name(rt, 11) == "9 custom_sub_group");
    CHECK(process_group_name(rt, 12) == "group 12");
    CHECK(process_group_name(rt, 3) == "tp");
}
