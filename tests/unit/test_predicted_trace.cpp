// The planner's prediction written as a trace (app/plan/predicted_trace.h): read back by the same analysis as a run,
// it must say what the planner says (step time, MFU, memory per stage and category, the bubble's stage) and say
// that it is a prediction; a trace file of it survives the round trip, and a failed write leaves nothing behind.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/plan/predicted_trace.h"
#include "profiler/predict/step_time.h"
#include "common/core/check.h"
#include "profiler/analysis/report.h"
#include "profiler/trace/trace_store.h"
#include "test_util.h"

using namespace us;
using namespace us::plan;
using namespace us::predict;
namespace fs = std::filesystem;

namespace {

Layout pipeline_layout() {
    Layout l;
    l.parallel.dp = 2, l.parallel.pp = 2, l.parallel.pp_schedule = PipelineSchedule::one_f_one_b, l.micro_batch = 8,
    l.grad_accum = 4, l.bf16 = false;
    return l;
}

int64_t modelled_peak(const prof::RankReport& r, MemCategory c) { return r.memory.peak[size_t(c)]; }

}  // namespace

TEST_CASE("predicted trace: the report of an engine layout's prediction says what the planner says",
          "[planner][predicted]") {
    const ModelDesc m = load_model("small");
    const ClusterDesc c = load_cluster("h100-sxm");
    const PlanResult plan = evaluate(m, c, pipeline_layout());
    const auto store = predicted_store(m, c, plan, plan.layout.world());
    const prof::Report rep = prof::build_report(*store);

    REQUIRE(rep.is_predicted());
    CHECK(std::string(rep.source()).find("predicted") == 0);
    CHECK(rep.ranks.size() == 2);               // one per pipeline stage
    CHECK(rep.throughput.steps_measured == 2);  // three steps, the first left out as for a run
    CHECK(rep.throughput.step_s == Approx(plan.time.step_s).epsilon(1e-6));
    CHECK(rep.throughput.tokens_per_s == Approx(plan.tokens_per_s).epsilon(1e-6));
    CHECK(rep.throughput.mfu == Approx(plan.mfu).epsilon(1e-6));
    // Memory: each stage's peak per category is the planner's estimate of that stage (the engine's walk), and the
    // report's own engine walk of the config agrees.
    for (const prof::RankReport& r : rep.ranks) {
        const int stage = r.coords.pp.value_or(-1);
        const MemoryEstimate e = estimate_stage_memory(m, c, plan.layout, stage);
        for (MemCategory k :
             {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state, MemCategory::temporaries}) {
            INFO("stage " << stage << " " << mem_category_name(k));
            CHECK(modelled_peak(r, k) == e.bytes[size_t(k)]);
            CHECK(r.predicted.memory[size_t(k)].value_or(-1) == e.bytes[size_t(k)]);
        }
        // Activations: whole micro-batches held at the schedule's peak (rounding of a per-layer share aside).
        const int64_t acts = e.bytes[size_t(MemCategory::activations)];
        CHECK(std::abs(modelled_peak(r, MemCategory::activations) - acts) <= 64);
        CHECK(r.predicted.micro_batches_in_flight == e.micro_batches_in_flight);
    }
    // The pipeline: stage 0 holds more micro-batches (1F1B) and the simulated bubble is on the report.
    CHECK(rep.pipeline.busiest_rank >= 0);
    CHECK(rep.pipeline.measured > 0);
    CHECK(rep.pipeline.measured < 1);
    // Data parallelism: the exposed reduction is there, on the dp group, with the bytes a ring sends.
    const prof::RankReport& r0 = rep.ranks.front();
    CHECK(r0.steady.group_bytes[size_t(prof::GroupKind::dp)] > 0);
    // The compute beside the hidden reduction ran slower (h100-sxm's overlap_slowdown): a span of its own on each
    // stage, as long as the model charges, within the step the report reads back.
    const StepModel sm = model_step(m, c, plan.layout);
    for (const prof::RankReport& r : rep.ranks) {
        const DpCost& dp = sm.dp[size_t(r.coords.pp.value_or(-1))];
        REQUIRE(dp.contention > 0);
        CHECK(dp.contention == Approx(c.overlap_slowdown * dp.hidden));
        const auto row = std::find_if(r.ops.rows.begin(), r.ops.rows.end(), [](const prof::OpRow& o) {
            return o.name == "compute slowed by the dp traffic hidden beside it";
        });
        REQUIRE(row != r.ops.rows.end());
        CHECK(r.ops.per_step(row->self_s) == Approx(dp.contention).margin(2e-9));  // whole nanoseconds
    }
    const std::string text = prof::format_report(rep);
    CHECK(text.find("PREDICTED, not a run") != std::string::npos);
    CHECK(text.find("(measured)") == std::string::npos);
}

TEST_CASE("predicted trace: another model's prediction (Llama 3 8B, tp, sp, pp interleaved) reads back",
          "[planner][predicted]") {
    const ModelDesc m = load_model("llama3-8b");
    const ClusterDesc c = load_cluster("h100-sxm");
    Layout l;
    l.parallel.dp = 4, l.parallel.tp = 4, l.parallel.sp = true, l.parallel.pp = 2,
    l.parallel.pp_schedule = PipelineSchedule::interleaved, l.parallel.pp_chunks = 2, l.parallel.zero = 1;
    l.micro_batch = 1, l.grad_accum = 8, l.flash = true;
    const PlanResult plan = evaluate(m, c, l);
    const auto store = predicted_store(m, c, plan, l.world());
    const prof::Report rep = prof::build_report(*store);
    REQUIRE(rep.is_predicted());
    CHECK(rep.config.empty());  // not the engine's model: no engine walk
    CHECK(rep.predict_input.parallel.pp == 2);
    CHECK(rep.throughput.step_s == Approx(plan.time.step_s).epsilon(1e-6));
    CHECK(rep.throughput.mfu == Approx(plan.mfu).epsilon(1e-6));
    CHECK(rep.pipeline.theory == Approx(1.0 / 16.0).epsilon(1e-9));  // (pp - 1) / (v m): 1 / (2 x 8)
    // Tensor parallelism is on the critical path: all of its time exposed, on the tp group.
    const int tp = int(prof::GroupKind::tp);
    for (const auto& r : rep.ranks) {
        CHECK(r.steady.group_bytes[size_t(tp)] > 0);
        CHECK(r.steady.group_exposed_s[size_t(tp)] == Approx(r.steady.group_comm_s[size_t(tp)]).epsilon(1e-6));
        const MemoryEstimate e = estimate_stage_memory(m, c, l, r.coords.pp.value_or(-1));
        CHECK(r.memory.peak[size_t(MemCategory::params)] == e.bytes[size_t(MemCategory::params)]);
    }
    // Many (micro-batch, layer) passes: each action drawn coarse, still the same step.
    PredictedTraceOptions coarse;
    coarse.max_detailed_layer_passes = 1;
    const prof::Report rc = prof::build_report(*predicted_store(m, c, plan, l.world(), coarse));
    CHECK(rc.throughput.step_s == Approx(plan.time.step_s).epsilon(1e-6));
    CHECK(store->span_count() > 4 * predicted_store(m, c, plan, l.world(), coarse)->span_count());
}

TEST_CASE("predicted trace: written as a file it reads back whole, and a failed write leaves nothing",
          "[planner][predicted]") {
    const ModelDesc m = load_model("small");
    const ClusterDesc c = load_cluster("a100-80gb");
    const PlanResult plan = evaluate(m, c, pipeline_layout());
    const std::string path = us::test::temp_path("predicted.ustrace");
    write_predicted_trace(path, m, c, plan, 4);
    for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))  // no temporary file left beside it
        CHECK(e.path().filename().string().find("predicted.ustrace.partial") == std::string::npos);
    prof::TraceStore loaded;
    CHECK(prof::load_trace(path, loaded).empty());
    loaded.finalize();
    CHECK(loaded.span_count() == predicted_store(m, c, plan, 4)->span_count());
    CHECK(loaded.run_rank_metadata().predicted.value()["gpus"] == 4);
    CHECK(loaded.run_rank_metadata().predicted.value()["cluster"] == "a100-80gb");
    const std::string bad = "/nonexistent-dir/predicted.ustrace";
    CHECK_THROWS_AS(write_predicted_trace(bad, m, c, plan, 4), UserError);
    CHECK_FALSE(fs::exists(bad));
    // The command line: --trace-out, then report reads it as a prediction.
    const std::string u = us::test::bin("ultrascope");
    const std::string out = us::test::temp_path("plan-trace-out.ustrace");
    const auto r =
        us::test::run_process(u +
                              " plan --model llama3-8b --gpu h100-sxm --dp 2 --tp 4 --sp --pp 2 --grad-accum 4 "
                              "--trace-out " +
                              out);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto rep = us::test::run_process(u + " report " + out + " --json");
    INFO(rep.output);
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output);
    CHECK(j["source"] == "predicted");
    CHECK(j["predicted_by_planner"]["model"] == "llama3-8b");
    CHECK(j["predicted"].contains("params"));  // the engine walk's block is still there (null fields for another model)
    CHECK(j["planner"].contains("error"));     // nothing measured to compare a prediction with
}
