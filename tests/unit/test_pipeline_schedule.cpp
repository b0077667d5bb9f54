// Pipeline schedules as data: every schedule runs every forward and backward exactly once per stage, never
// deadlocks, and on an idealised machine shows the bubble and the activation memory the theory says.
#include "common/core/check.h"
#include "common/schedule/pipeline_schedule.h"
#include "profiler/predict/predict.h"
#include "test_util.h"

using namespace us;

namespace {

void check_complete(const Schedule& s, const PipelineShape& shape, bool split) {
    REQUIRE(int(s.size()) == shape.pp);
    for (int st = 0; st < shape.pp; ++st) {
        std::map<std::tuple<int, int, int>, int> seen;
        for (const auto& a : s[size_t(st)]) ++seen[{int(a.op), a.micro_batch, a.chunk}];
        const int kinds = split ? 3 : 2;
        CHECK(int(seen.size()) == shape.micro_batches * shape.chunks * kinds);
        for (auto& [k, n] : seen) CHECK(n == 1);
        // a chunk's backwards run in micro-batch order (the last one finishes its gradients)
        std::map<int, int> last_b;
        for (const auto& a : s[size_t(st)])
            if (a.op != PipeOp::forward && a.op != PipeOp::backward_weight) {
                CHECK(a.micro_batch > last_b.emplace(a.chunk, -1).first->second);
                last_b[a.chunk] = a.micro_batch;
            }
    }
}

}  // namespace

TEST_CASE("every schedule is complete and deadlock-free", "[cpu][pipeline]") {
    for (const char* name : {"afab", "1f1b", "interleaved", "zb1"})
        for (int pp : {2, 4})
            for (int m : {1, 2, 4, 8, 16}) {
                PipelineShape shape{pp, m, std::string(name) == "interleaved" ? 2 : 1};
                if (std::string(name) == "interleaved" && (m < pp || m % pp != 0)) {
                    CHECK_THROWS_AS(make_schedule(parse_pipeline_schedule(name), shape), UserError);
                    continue;
                }
                INFO(name << " pp " << pp << " m " << m);
                const Schedule s = make_schedule(parse_pipeline_schedule(name), shape);
                check_complete(s, shape, std::string(name) == "zb1");
                CHECK_NOTHROW(simulate_schedule(s, shape));
            }
}

TEST_CASE("AFAB and 1F1B have the bubble (pp - 1) / m, 1F1B holds at most pp micro-batches", "[cpu][pipeline]") {
    for (int pp : {2, 4})
        for (int m : {4, 8, 16}) {
            const PipelineShape shape{pp, m, 1};
            const Simulation afab = simulate_schedule(make_schedule(PipelineSchedule::afab, shape), shape);
            const Simulation ofob = simulate_schedule(make_schedule(PipelineSchedule::one_f_one_b, shape), shape);
            INFO("pp " << pp << " m " << m);
            for (int st = 0; st < pp; ++st) {
                CHECK(afab.bubble[size_t(st)] == Approx(double(pp - 1) / m));
                CHECK(ofob.bubble[size_t(st)] == Approx(double(pp - 1) / m));
                CHECK(ofob.max_in_flight[size_t(st)] == std::min(pp - st, m));
            }
            CHECK(afab.max_in_flight[0] == m);  // all of them, on the first stage
        }
}

TEST_CASE("interleaving divides the bubble by the chunks, ZB-H1 cuts it below 1F1B at 1F1B's memory",
          "[cpu][pipeline]") {
    for (int pp : {2, 4})
        for (int m : {4, 8, 16}) {
            const PipelineShape one{pp, m, 1}, two{pp, m, 2};
            const Simulation ofob = simulate_schedule(make_schedule(PipelineSchedule::one_f_one_b, one), one);
            const Simulation inter = simulate_schedule(make_schedule(PipelineSchedule::interleaved, two), two);
            const Simulation zb = simulate_schedule(make_schedule(PipelineSchedule::zb1, one), one);
            INFO("pp " << pp << " m " << m);
            CHECK(inter.bubble[0] == Approx(double(pp - 1) / (2.0 * m)).epsilon(0.15));
            CHECK(zb.bubble[0] < ofob.bubble[0]);
            // ZB-H1's bubble is a third of 1F1B's (F = B = W), at the first stage's 1F1B memory on every stage
            for (int st = 0; st < pp; ++st) {
                CHECK(zb.bubble[size_t(st)] == Approx(double(pp - 1) / (3.0 * m)));
                CHECK(zb.max_in_flight[size_t(st)] == pp);
            }
        }
}

TEST_CASE("bad pipeline shapes are refused with the reason", "[cpu][pipeline][errors]") {
    auto why = [](const char* name, PipelineShape s) {
        try {
            make_schedule(parse_pipeline_schedule(name), s);
        } catch (const UserError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(why("gpipe", {2, 4, 1}).find("unknown --pp-schedule 'gpipe'") != std::string::npos);
    CHECK(why("interleaved", {4, 2, 2}).find("multiple of --pp") != std::string::npos);
    CHECK(why("1f1b", {2, 4, 2}).find("needs --pp-schedule interleaved") != std::string::npos);
    CHECK(action_label({PipeOp::backward_weight, 3, 0}, 1) == "W3");
    CHECK(action_label({PipeOp::forward, 2, 1}, 2) == "F2.c1");
}

// A review found the textbook's activations of an interleaved pipeline taken at the simulated in-flight count's
// ceiling (5 micro-batches on stage 1 of pp 4, V 3, where it holds 13 chunks: 4.33).
TEST_CASE("the textbook's activations of an interleaved stage count chunks: pp (1 + (pp - 1)/(pp V)) on the first",
          "[cpu][pipeline][predict]") {
    const nlohmann::json config = {{"hidden", 256}, {"layers", 12},    {"heads", 4},
                                   {"seq", 128},    {"vocab", 256},    {"batch", 2},
                                   {"pp", 4},       {"grad_accum", 8}, {"pp_schedule", "interleaved"},
                                   {"pp_chunks", 3}};
    us::predict::PredictInput in = us::predict::PredictInput::from_config(config);
    const PipelineShape shape{4, 8, 3};
    const Simulation sim = simulate_schedule(make_schedule(PipelineSchedule::interleaved, shape), shape);
    for (int stage = 0; stage < 4; ++stage) {
        in.stage = stage;
        const us::predict::Prediction p = us::predict::predict(in);
        const double per_layer_of_stage = double(p.activations_per_layer_formula) * 3;  // 12 layers over 4 stages
        const double held = double(*p.memory_formula[size_t(MemCategory::activations)]) / per_layer_of_stage;
        INFO("stage " << stage);
        CHECK(held == Approx(double(sim.max_chunks_in_flight[size_t(stage)]) / 3.0).epsilon(1e-6));
        if (stage == 0) CHECK(held == Approx(4.0 * (1.0 + 3.0 / 12.0)));  // Narayanan et al.: 5
    }
}
