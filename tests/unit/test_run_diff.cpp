// What changed between two runs (profiler/diff/run_diff.h) on hand-built data-parallel digests whose every figure is
// worked out below: the causes add up to the step's change exactly; compute splits by kind with the ops that moved;
// a slowed rank's waits go to it as the straggler with blame's count as evidence; ops are matched by name, not by
// time; ranks without a partner are said; equal runs differ within noise; a run without a steady step is refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "common/core/check.h"
#include "common/settings/config.h"
#include "profiler/analysis/cross_rank.h"
#include "profiler/diff/diff_load.h"
#include "profiler/diff/memory_peaks.h"
#include "profiler/diff/run_diff.h"

using namespace us::prof;

namespace {

constexpr int64_t kSecond = 1'000'000'000;

// A rank's compute per step by kind (gemm, attention, elementwise, optimizer, other: seconds), the idle it spends
// before the all-reduce (a bubble), and its op rows (one per kind, named after it, when empty).
struct RankPlan {
    std::array<double, kComputeKindCount> kinds{0.3, 0.1, 0.1, 0, 0};
    double bubble = 0;
    std::vector<DigestOp> ops;
    double odd_steps = 0, even_steps = 0;  // s more compute in odd steps only, in even steps only
    int slow_step = 0;                     // one step with `slow_step_s` more compute (0: none)
    double slow_step_s = 0;
};

// Steps 1..steps: each rank computes, idles its bubble, then enters one dp all-reduce that ends 0.1 s after the last
// rank enters it; 0.05 s of idle closes the step. So per rank wall = compute + exposed + idle, and each rank waits
// (last arrival - its arrival). `jitter` s is added to every rank's gemm in odd steps, taken in even ones. Step
// times start at `t0` s.
CrossRank dp_run(const std::vector<RankPlan>& plans, int steps = 5, double jitter = 0, double t0 = 0,
                 const std::function<void(std::vector<RankDigest>&)>& edit = {}) {
    std::vector<RankDigest> out(plans.size());
    int64_t start = int64_t(t0 * 1e9);
    for (int step = 1; step <= steps; ++step) {
        const double j = step % 2 ? jitter : -jitter;
        std::vector<double> compute(plans.size()), arrive(plans.size());
        double last = 0;
        for (size_t r = 0; r < plans.size(); ++r) {
            for (double k : plans[r].kinds) compute[r] += k;
            compute[r] += j + (step % 2 ? plans[r].odd_steps : plans[r].even_steps);
            if (step == plans[r].slow_step) compute[r] += plans[r].slow_step_s;
            arrive[r] = compute[r] + plans[r].bubble;
            last = std::max(last, arrive[r]);
        }
        const double wall = last + 0.15;
        for (size_t r = 0; r < plans.size(); ++r) {
            RankDigest& d = out[r];
            DigestStep s;
            s.step = step, s.begin = start, s.end = start + int64_t(wall * 1e9);
            s.wall_s = wall, s.compute_s = compute[r], s.comm_s = last + 0.1 - arrive[r];
            s.exposed_s = s.comm_s, s.idle_s = 0.05 + plans[r].bubble, s.bubble_s = plans[r].bubble;
            s.group_exposed_s[size_t(GroupKind::dp)] = s.exposed_s;
            d.steps.push_back(s);
            DigestCollective c;
            c.group = 0, c.index = step - 1, c.op = OpClass::all_reduce, c.step = step, c.phase = Phase::backward;
            c.bytes = 1 << 20, c.begin = start + int64_t(arrive[r] * 1e9), c.end = start + int64_t((last + 0.1) * 1e9);
            d.collectives.push_back(c);
        }
        start += int64_t(wall * 1e9) + kSecond / 100;
    }
    for (size_t r = 0; r < plans.size(); ++r) {
        RankDigest& d = out[r];
        d.rank = int(r), d.label = "rank " + std::to_string(r), d.source = "engine";
        d.world_size = int(plans.size());
        d.groups.push_back({"dp|0", "dp", {}, int(GroupKind::dp)});
        d.kind_self_s = plans[r].kinds;
        d.ops_complete = true;
        d.ops = plans[r].ops;
        if (d.ops.empty())
            for (int k = 0; k < kComputeKindCount; ++k)
                if (plans[r].kinds[k] > 0)
                    d.ops.push_back({std::string(kComputeKindNames[k]) + " op", OpClass::gemm, 1, plans[r].kinds[k],
                                     ComputeKind(k)});
    }
    if (edit) edit(out);
    return cross_rank(std::move(out));
}

RunDiff diff(const CrossRank& a, const CrossRank& b) { return diff_runs({"A", &a, {}}, {"B", &b, {}}); }

double sum_of_causes(const RunDiff& d) {
    double s = 0;
    for (const Cause& c : d.causes) s += c.ms;
    return s;
}

const Cause* find_cause(const RunDiff& d, CauseKind kind, const std::string& what = "") {
    for (const Cause& c : d.causes)
        if (c.kind == kind && (what.empty() || c.what == what)) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("diff: a slower attention is compute (attention), and the causes add up to the step exactly", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}});
    RankPlan slower;
    slower.kinds[size_t(ComputeKind::attention)] += 0.1;
    const CrossRank b = dp_run({slower, slower});
    const RunDiff d = diff(a, b);
    CHECK(d.a_step_ms == Approx(650));
    CHECK(d.b_step_ms == Approx(750));
    CHECK(d.delta_ms == Approx(100));
    CHECK_FALSE(d.within_noise);
    REQUIRE(!d.causes.empty());
    CHECK(d.causes[0].kind == CauseKind::compute);
    CHECK(d.causes[0].what == "attention");
    CHECK(d.causes[0].ms == Approx(100));
    REQUIRE(!d.causes[0].ops.empty());
    CHECK(d.causes[0].ops[0].name == "attention op");
    CHECK(d.causes[0].ops[0].b_ms - d.causes[0].ops[0].a_ms == Approx(100));
    CHECK(std::abs(d.unexplained_ms) < 1e-6);
    CHECK(sum_of_causes(d) + d.unexplained_ms == Approx(d.delta_ms));
    CHECK(d.verdict.find("B is 100.00 ms (15.4%) slower per step") == 0);
    CHECK(d.verdict.find("compute (attention)") != std::string::npos);
}

TEST_CASE("diff: compute splits per kind, each with its own sign", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}});
    RankPlan changed;
    changed.kinds[size_t(ComputeKind::gemm)] += 0.05;
    changed.kinds[size_t(ComputeKind::elementwise)] -= 0.02;
    const RunDiff d = diff(a, dp_run({changed, changed}));
    REQUIRE(find_cause(d, CauseKind::compute, "gemm"));
    REQUIRE(find_cause(d, CauseKind::compute, "elementwise"));
    CHECK(find_cause(d, CauseKind::compute, "gemm")->ms == Approx(50));
    CHECK(find_cause(d, CauseKind::compute, "elementwise")->ms == Approx(-20));
    CHECK(find_cause(d, CauseKind::compute, "attention") == nullptr);  // unchanged: no cause
    CHECK(d.delta_ms == Approx(30));
    CHECK(sum_of_causes(d) == Approx(30));
}

TEST_CASE("diff: a slowed rank's waits are the straggler's, on that rank, with blame's count", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}, RankPlan{}, RankPlan{}});
    RankPlan slow;
    slow.kinds[size_t(ComputeKind::gemm)] += 0.3;
    const CrossRank b = dp_run({RankPlan{}, RankPlan{}, slow, RankPlan{}});
    const RunDiff d = diff(a, b);
    CHECK(d.delta_ms == Approx(300));
    REQUIRE(!d.causes.empty());
    const Cause& top = d.causes[0];
    CHECK(top.kind == CauseKind::straggler);
    CHECK(top.source == "derived");
    // three ranks of four wait 0.3 s a step: 225 ms on the ranks' mean; the slow rank's own gemm is the other 75
    CHECK(top.ms == Approx(225).margin(0.01));
    REQUIRE(top.rank);
    CHECK(*top.rank == 2);
    CHECK(top.group == "dp");
    CHECK(top.evidence.find("B's rank 2 arrived last in 4 of 4 collectives of dp") != std::string::npos);
    const Cause* gemm = find_cause(d, CauseKind::compute, "gemm");
    REQUIRE(gemm);
    CHECK(gemm->ms == Approx(75));
    REQUIRE(gemm->rank);
    CHECK(*gemm->rank == 2);
    CHECK(std::abs(d.unexplained_ms) < 0.01);
    // predicted: B without the straggler's waits is its step less what each other rank waited
    REQUIRE(d.what_if.size() == 2);
    CHECK(d.what_if[0].name == "without the straggler");
    CHECK(d.what_if[0].step_ms == Approx(950 - 300).margin(0.01));
    CHECK(d.what_if[1].name == "with A's kernels");
    CHECK(d.what_if[1].step_ms == Approx(950 - 75).margin(0.01));
}

TEST_CASE("diff: ops are matched by name and class, never by time, and an op new in B is its own cause",
          "[cpu][diff]") {
    RankPlan a_plan, b_plan;
    a_plan.ops = {{"mlp.c_fc", OpClass::gemm, 4, 0.3, ComputeKind::gemm},
                  {"attention", OpClass::attention, 1, 0.1, ComputeKind::attention},
                  {"layernorm", OpClass::norm, 2, 0.1, ComputeKind::elementwise}};
    b_plan.kinds = {0.32, 0.1, 0.13, 0, 0};
    // B lists its ops in another order, one more call, a dropout A had not, and its steps start 1000 s later
    b_plan.ops = {{"dropout", OpClass::activation, 1, 0.03, ComputeKind::elementwise},
                  {"attention", OpClass::attention, 1, 0.1, ComputeKind::attention},
                  {"layernorm", OpClass::norm, 2, 0.1, ComputeKind::elementwise},
                  {"mlp.c_fc", OpClass::gemm, 5, 0.32, ComputeKind::gemm}};
    const RunDiff d = diff(dp_run({a_plan, a_plan}), dp_run({b_plan, b_plan}, 5, 0, 1000));
    CHECK(d.delta_ms == Approx(50));
    const Cause* fresh = find_cause(d, CauseKind::new_ops);
    REQUIRE(fresh);
    CHECK(fresh->ms == Approx(30));
    REQUIRE(fresh->ops.size() == 1);
    CHECK(fresh->ops[0].name == "dropout");
    CHECK(fresh->ops[0].match == "new");
    // elementwise's change is all the new op's; gemm's is the one matched op's
    CHECK(find_cause(d, CauseKind::compute, "elementwise") == nullptr);
    CHECK(find_cause(d, CauseKind::compute, "attention") == nullptr);
    const Cause* gemm = find_cause(d, CauseKind::compute, "gemm");
    REQUIRE(gemm);
    CHECK(gemm->ms == Approx(20));
    REQUIRE(gemm->ops.size() == 1);
    CHECK(gemm->ops[0].name == "mlp.c_fc");
    CHECK(gemm->ops[0].a_ms == Approx(300));
    CHECK(gemm->ops[0].b_ms == Approx(320));
}

TEST_CASE(
    "diff: a kind whose ops were replaced (naive attention by flash) keeps its change, new and gone ops as "
    "evidence",
    "[cpu][diff]") {
    RankPlan a_plan, b_plan;
    a_plan.ops = {{"attention naive", OpClass::attention, 1, 0.1, ComputeKind::attention}};
    b_plan.kinds[size_t(ComputeKind::attention)] = 0.04;
    b_plan.ops = {{"attention flash", OpClass::attention, 1, 0.04, ComputeKind::attention}};
    const RunDiff d = diff(dp_run({a_plan, a_plan}), dp_run({b_plan, b_plan}));
    CHECK(d.delta_ms == Approx(-60));
    CHECK(find_cause(d, CauseKind::new_ops) == nullptr);
    REQUIRE(!d.causes.empty());
    CHECK(d.causes[0].kind == CauseKind::compute);
    CHECK(d.causes[0].what == "attention");
    CHECK(d.causes[0].ms == Approx(-60));
    REQUIRE(d.causes[0].ops.size() == 2);
    CHECK(d.causes[0].ops[0].name == "attention naive");
    CHECK(d.causes[0].ops[0].match == "gone");
    CHECK(d.causes[0].ops[1].match == "new");
    CHECK(d.verdict.find("faster") != std::string::npos);
}

TEST_CASE("diff: ranks without a partner are said, and the step is compared at the ranks' mean", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}, RankPlan{}, RankPlan{}});
    const CrossRank b = dp_run({RankPlan{}, RankPlan{}});
    const RunDiff d = diff(a, b);
    CHECK(d.ranks_by == "rank");
    CHECK(d.a_only == std::vector<int>{2, 3});
    CHECK(d.b_only.empty());
    CHECK(d.ranks.size() == 2);
    bool said = false;
    for (const std::string& n : d.notes) said = said || n.find("A has 4 ranks, B 2") != std::string::npos;
    CHECK(said);
    CHECK(d.within_noise);
    CHECK(format_diff(d).find("ranks only in A: 2, 3") != std::string::npos);
}

TEST_CASE("diff: two runs of the same settings differ within their own noise, and say so", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}}, 6, 0.004);
    const CrossRank b = dp_run({RankPlan{}, RankPlan{}}, 7, 0.003);
    const RunDiff d = diff(a, b);
    CHECK(d.noise_ms == Approx(8));
    CHECK(std::abs(d.delta_ms) <= d.noise_ms);
    CHECK(d.within_noise);
    CHECK(d.verdict.rfind("B does not differ from A beyond noise", 0) == 0);
    const nlohmann::json j = diff_json(d);
    CHECK(j["within_noise"] == true);
    CHECK(j["noise_ms"].get<double>() == Approx(8));
    CHECK(j["a_steps_ms"].size() == 5);
}

TEST_CASE("diff: a repeat of A's settings gives the noise between runs, which a whole run's slowdown is within",
          "[cpu][diff]") {
    RankPlan slower, slowest;
    slower.kinds[size_t(ComputeKind::gemm)] += 0.03, slowest.kinds[size_t(ComputeKind::gemm)] += 0.04;
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}}), b = dp_run({slower, slower}),
                    again = dp_run({slowest, slowest});
    const nlohmann::json settings = {{"preset", "tiny"}, {"dp", 2}};
    // Alone, each run steady to the nanosecond: B's +30 ms is beyond the runs' own spread.
    const RunDiff alone = diff_runs({"A", &a, {}, settings}, {"B", &b, {}, settings});
    CHECK(alone.delta_ms == Approx(30));
    CHECK_FALSE(alone.within_noise);
    CHECK_FALSE(alone.noise_between_ms);
    CHECK(format_diff(alone).find("give one with --repeat") != std::string::npos);
    // A run of A's settings again read 40 ms slower than A: the machine moves that much between runs.
    const RunDiff d = diff_runs({"A", &a, {}, settings}, {"B", &b, {}, settings}, {{"A2", &again, {}, settings}});
    REQUIRE(d.noise_between_ms);
    CHECK(*d.noise_between_ms == Approx(40));
    CHECK(d.noise_within_ms == Approx(0));
    CHECK(d.noise_ms == Approx(40));
    REQUIRE(d.repeats.size() == 1);
    CHECK(d.repeats[0].name == "A2");
    CHECK(d.repeats[0].step_ms == Approx(d.a_step_ms + 40));
    CHECK(d.within_noise);
    CHECK(d.verdict.find("within the spread between runs of A's settings of 40.00 ms") != std::string::npos);
    CHECK(format_diff(d).find("A and its 1 repeat(s)") != std::string::npos);
    const nlohmann::json j = diff_json(d);
    CHECK(j["noise_between_ms"].get<double>() == Approx(40));
    CHECK(j["noise_from"] == "the spread between runs of A's settings");
    CHECK(j["repeats"][0]["name"] == "A2");
    // the causes are B's against A's still: the repeat only sizes the noise
    REQUIRE(d.causes.size() == alone.causes.size());
    for (size_t i = 0; i < d.causes.size(); ++i) CHECK(d.causes[i].ms == alone.causes[i].ms);
}

TEST_CASE("diff: a repeat whose settings differ from A's is refused, naming what differs", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}});
    const nlohmann::json settings = {{"dp", 2}, {"grad_accum", 1}};
    const nlohmann::json other = {{"dp", 2}, {"grad_accum", 4}};
    try {
        diff_runs({"A", &a, {}, settings}, {"B", &a, {}, settings}, {{"A2", &a, {}, other}});
        FAIL("a repeat of other settings was taken");
    } catch (const us::UserError& e) {
        CHECK(std::string(e.what()).find("repeat (A2): not a run of A's settings (grad_accum 1 -> 4)") !=
              std::string::npos);
    }
    // a repeat whose settings are not known (an imported trace) of a run of this engine is another job: refused;
    // beside runs whose settings are not known either it is taken as A's, the notes say so, if it has A's ranks
    CHECK_THROWS_WITH(diff_runs({"A", &a, {}, settings}, {"B", &a, {}, settings}, {{"A2", &a, {}, nullptr}}),
                      Catch::Contains("its settings are not known (an imported trace), and A is a run of this engine"));
    const RunDiff d = diff_runs({"A", &a, {}, nullptr}, {"B", &a, {}, nullptr}, {{"A2", &a, {}, nullptr}});
    CHECK(d.repeats.size() == 1);
    CHECK(format_diff(d).find("repeat (A2): its settings are not known") != std::string::npos);
    const CrossRank four = dp_run({RankPlan{}, RankPlan{}, RankPlan{}, RankPlan{}});
    CHECK_THROWS_WITH(diff_runs({"A", &a, {}, nullptr}, {"B", &a, {}, nullptr}, {{"A4", &four, {}, nullptr}}),
                      Catch::Contains("it has 4 rank(s) where A has 2"));
    // B's settings known and A's not: a run of B's settings is B's, not A's
    const RunDiff by_b = diff_runs({"A", &a, {}, nullptr}, {"B", &a, {}, other}, {{"B2", &a, {}, other}});
    REQUIRE(by_b.repeats.size() == 1);
    CHECK(by_b.repeats[0].of == 'B');
    CHECK(by_b.noise_between_of == 'B');  // a tie (0 and 0): the side with the repeat
}

TEST_CASE(
    "diff: a repeat of B's settings is B's, the larger of the two runs' ranges is the noise, other settings are "
    "refused naming both",
    "[cpu][diff]") {
    RankPlan slower, slowest, slow_again;
    slower.kinds[size_t(ComputeKind::gemm)] += 0.03, slowest.kinds[size_t(ComputeKind::gemm)] += 0.04;
    slow_again.kinds[size_t(ComputeKind::gemm)] += 0.08;
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}}), b = dp_run({slower, slower}), a2 = dp_run({slowest, slowest}),
                    b2 = dp_run({slow_again, slow_again});
    const nlohmann::json sa = {{"dp", 2}, {"grad_accum", 1}}, sb = {{"dp", 2}, {"grad_accum", 4}};
    // A2 reads 40 ms over A, B2 50 ms over B: B's pair moved more, and sizes the noise
    const RunDiff d = diff_runs({"A", &a, {}, sa}, {"B", &b, {}, sb}, {{"A2", &a2, {}, sa}, {"B2", &b2, {}, sb}});
    REQUIRE(d.repeats.size() == 2);
    CHECK(d.repeats[0].of == 'A');
    CHECK(d.repeats[1].of == 'B');
    REQUIRE(d.noise_between_ms);
    CHECK(*d.noise_between_ms == Approx(50));
    CHECK(d.noise_between_of == 'B');
    CHECK(noise_words(d) == "the spread between runs of B's settings");
    CHECK(format_diff(d).find("A and its 1 repeat(s): A ") != std::string::npos);
    CHECK(format_diff(d).find("B and its 1 repeat(s): B ") != std::string::npos);
    CHECK(diff_json(d)["repeats"][1]["of"] == "B");
    // neither A's nor B's settings: refused, naming what differs from each
    try {
        diff_runs({"A", &a, {}, sa}, {"B", &b, {}, sb}, {{"C", &a2, {}, {{"dp", 2}, {"grad_accum", 8}}}});
        FAIL("a repeat of neither run's settings was taken");
    } catch (const us::UserError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find(
                  "not a run of A's settings (grad_accum 1 -> 8) nor of B's (grad_accum 4 -> 8)") != std::string::npos);
    }
}

TEST_CASE("diff: the settings B changed are listed, read through the settings table, the data file aside",
          "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}});
    // B's metadata writes the default bucket size that A's (an older version, say) left out: not a change
    const nlohmann::json sa = {{"preset", "tiny"}, {"dp", 2}, {"grad_accum", 1}, {"data", "/tmp/a.txt"}};
    const nlohmann::json sb = {{"preset", "tiny"},
                               {"dp", 2},
                               {"grad_accum", 8},
                               {"zero", 1},
                               {"bucket_mb", us::TrainConfig{}.parallel.bucket_mb},
                               {"data", "/tmp/b.txt"}};
    const RunDiff d = diff_runs({"A", &a, {}, sa}, {"B", &a, {}, sb});
    REQUIRE(d.settings);
    REQUIRE(d.settings->size() == 2);
    CHECK((*d.settings)[0].key == "grad_accum");  // the table's order
    CHECK((*d.settings)[1].key == "zero");
    CHECK(describe_changes(*d.settings) == "grad_accum 1 -> 8, zero 0 -> 1");
    CHECK(format_diff(d).find("settings changed: grad_accum 1 -> 8, zero 0 -> 1") != std::string::npos);
    CHECK(diff_json(d)["settings_changed"][0]["b"] == 8);
    // unknown where a side has no settings (a PyTorch run)
    const RunDiff imported = diff_runs({"A", &a, {}, sa}, {"B", &a, {}, nullptr});
    CHECK_FALSE(imported.settings);
    CHECK(diff_json(imported)["settings_changed"].is_null());
    CHECK(format_diff(imported).find("settings changed: unknown") != std::string::npos);
}

TEST_CASE("diff: a smaller bubble is the pipeline's bubble", "[cpu][diff]") {
    RankPlan big, small;
    big.bubble = 0.2, small.bubble = 0.05;
    // Without a pipeline the idle between a step's first and last op is idle, not a bubble.
    const RunDiff flat = diff(dp_run({big, big}), dp_run({small, small}));
    CHECK(flat.delta_ms == Approx(-150));
    REQUIRE(!flat.causes.empty());
    CHECK(flat.causes[0].kind == CauseKind::idle);
    CHECK(flat.causes[0].ms == Approx(-150));
    CHECK(find_cause(flat, CauseKind::bubble) == nullptr);
    // The same ranks as the two stages of a pipeline: the bubble.
    CrossRank a = dp_run({big, big}), b = dp_run({small, small});
    a.pipelines.pipelines = b.pipelines.pipelines = {{0, 1}};
    const RunDiff d = diff(a, b);
    CHECK(d.delta_ms == Approx(-150));
    REQUIRE(!d.causes.empty());
    CHECK(d.causes[0].kind == CauseKind::bubble);
    CHECK(d.causes[0].ms == Approx(-150));
    CHECK(std::abs(d.unexplained_ms) < 1e-6);
}

TEST_CASE("diff: a last stage waiting in the embedding all-reduce for the first's cooldown is the bubble",
          "[cpu][diff]") {
    // Two stages: the first computes `cooldown` s more at the step's end (its last backward) while the last stage,
    // done, waits for it inside the tied embeddings' all-reduce. The breakdown counts that wait as exposed embedding
    // communication and as bubble (bubble_waiting_s); the diff must say it once, as the bubble.
    auto pipeline = [](double cooldown) {
        CrossRank x = dp_run({RankPlan{}, RankPlan{}}, 5, 0, 0, [cooldown](std::vector<RankDigest>& ranks) {
            for (size_t i = 0; i < ranks[0].steps.size(); ++i) {
                DigestStep &first = ranks[0].steps[i], &last = ranks[1].steps[i];
                first.compute_s += cooldown;
                last.exposed_s += cooldown, last.bubble_s += cooldown, last.bubble_waiting_s = cooldown;
                last.group_exposed_s[size_t(GroupKind::embedding)] = cooldown;
                for (DigestStep* s : {&first, &last}) s->wall_s += cooldown, s->end += int64_t(cooldown * 1e9);
            }
            ranks[0].kind_self_s[size_t(ComputeKind::gemm)] += cooldown;
            ranks[0].ops[0].self_s += cooldown;
        });
        x.pipelines.pipelines = {{0, 1}};
        return x;
    };
    const RunDiff d = diff(pipeline(0.1), pipeline(0.02));
    CHECK(d.delta_ms == Approx(-80));
    const Cause* bubble = find_cause(d, CauseKind::bubble);
    REQUIRE(bubble);
    CHECK(bubble->ms == Approx(-40));  // the ranks' mean: the last stage's 80 ms less waiting
    const Cause* gemm = find_cause(d, CauseKind::compute, "gemm");
    REQUIRE(gemm);
    CHECK(gemm->ms == Approx(-40));  // and the first stage's 80 ms less cooldown
    const Cause* embedding = find_cause(d, CauseKind::exposed_comm, "embedding");
    CHECK((!embedding || std::abs(embedding->ms) < 1e-6));
    CHECK(sum_of_causes(d) == Approx(d.delta_ms));
    CHECK(std::abs(d.unexplained_ms) < 1e-6);
}

TEST_CASE("diff: the JSON carries the steps, the causes with their evidence, and what is unexplained", "[cpu][diff]") {
    RankPlan slow;
    slow.kinds[size_t(ComputeKind::gemm)] += 0.3;
    const RunDiff d = diff(dp_run({RankPlan{}, RankPlan{}, RankPlan{}}), dp_run({RankPlan{}, slow, RankPlan{}}));
    const nlohmann::json j = diff_json(d);
    for (const char* key : {"a_step_ms", "b_step_ms", "causes", "unexplained_ms", "noise_ms", "what_if", "verdict"})
        CHECK(j.contains(key));
    REQUIRE(j["causes"].size() >= 2);
    CHECK(j["causes"][0]["kind"] == "straggler");
    CHECK(j["causes"][0]["evidence"]["rank"] == 1);
    CHECK(j["causes"][0]["evidence"]["group"] == "dp");
    CHECK(j["what_if"][0]["source"] == "derived");  // a first-order estimate, not the engine's walk
    CHECK(format_diff(d).find("What if (derived") != std::string::npos);
    // by_cause_s: the causes summed per kind and per what they name, in seconds (a lesson's claim reads them)
    double sum_s = 0;
    for (const auto& [kind, parts] : j["by_cause_s"].items()) sum_s += parts["total"].get<double>();
    CHECK(sum_s * 1e3 == Approx(d.delta_ms - d.unexplained_ms).margin(1e-9));
    CHECK(j["by_cause_s"]["straggler"]["total"].get<double>() * 1e3 == Approx(j["causes"][0]["ms"].get<double>()));
    CHECK(j["by_cause_s"]["bubble"]["total"] == 0.0);  // every kind has its total, 0 without a cause
    CHECK(!j["by_cause_s"]["bubble"].contains("pipeline"));
}

TEST_CASE("diff: a run without a steady step is refused by name", "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}});
    const CrossRank empty = cross_rank({RankDigest{}});
    CHECK_THROWS_AS(diff(a, empty), us::UserError);
    try {
        diff(a, empty);
    } catch (const us::UserError& e) {
        CHECK(std::string(e.what()).find("B (B): no rank has a steady step") != std::string::npos);
    }
}

TEST_CASE("diff: a digest keeps its per-group exposed time and its compute per kind through its bytes", "[cpu][diff]") {
    RankDigest d = dp_run({RankPlan{}}).digests[0];
    d.steps[1].bubble_waiting_s = 0.25;
    const RankDigest back = digest_from_bytes(digest_bytes(d), "test");
    CHECK(back.steps[1].bubble_waiting_s == 0.25);
    CHECK(back.kind_self_s == d.kind_self_s);
    CHECK(back.ops_complete);
    REQUIRE(back.ops.size() == d.ops.size());
    CHECK(back.ops[1].kind == ComputeKind::attention);
    CHECK(back.steps[1].group_exposed_s[size_t(GroupKind::dp)] == Approx(d.steps[1].group_exposed_s[1]));
}

TEST_CASE("diff: each run's waits for a core per steady step, the trainer's and the OpenMP workers' summed",
          "[cpu][diff]") {
    // The waits are set on the digests as the trainer's counters would give them (rank r's trainer waits 10 + r ms
    // a step in A, 80 ms on rank 1 in B; the workers 30 ms a step in A, 50 in B, on every rank).
    auto with_waits = [](CrossRank x, std::function<double(int)> trainer_s, double workers_s) {
        for (RankDigest& d : x.digests)
            for (DigestStep& s : d.steps) s.core_wait_s = trainer_s(d.rank), s.worker_core_wait_s = workers_s;
        return x;
    };
    const CrossRank a = with_waits(
        dp_run({RankPlan{}, RankPlan{}}), [](int r) { return 0.010 + 0.001 * r; }, 0.030);
    const CrossRank b = with_waits(
        dp_run({RankPlan{}, RankPlan{}}), [](int r) { return r == 1 ? 0.080 : 0.010; }, 0.050);
    const RunDiff d = diff(a, b);
    REQUIRE(d.a_core_wait);
    REQUIRE(d.b_core_wait);
    CHECK(d.a_core_wait->mean_ms == Approx(10.5));
    CHECK(d.b_core_wait->most_rank == 1);
    CHECK(d.b_core_wait->most_ms == Approx(80));
    CHECK(d.a_core_wait->workers_mean_ms == Approx(30));
    CHECK(d.b_core_wait->workers_mean_ms == Approx(50));
    CHECK(diff_json(d)["b_core_wait"]["workers_mean_ms"].get<double>() == Approx(50));
    CHECK(format_diff(d).find("OpenMP workers 50.00 ms, summed") != std::string::npos);

    // One step of one rank without the workers' counter (a trace from before it): unknown, said as such
    CrossRank older = a;
    older.digests[0].steps[2].worker_core_wait_s = -1;
    const RunDiff partly = diff(older, b);
    REQUIRE(partly.a_core_wait);
    CHECK(partly.a_core_wait->workers_mean_ms == -1);
    CHECK(diff_json(partly)["a_core_wait"]["workers_mean_ms"].is_null());
}

TEST_CASE("diff: a slowdown is the machine's load where B's most-waiting rank waited beyond its work's share",
          "[cpu][diff]") {
    // B's rank 1 computes 0.3 s more a step (B is 0.3 s slower). Its trainer thread waited 0.5 s a step for a core.
    auto with_times = [](CrossRank x, int rank, double wait_s, double cpu_s, double others_wait_s,
                         double others_cpu_s) {
        for (RankDigest& d : x.digests)
            for (DigestStep& s : d.steps)
                s.core_wait_s = d.rank == rank ? wait_s : others_wait_s,
                s.core_cpu_s = d.rank == rank ? cpu_s : others_cpu_s;
        return x;
    };
    RankPlan slow;
    slow.kinds[0] += 0.3;
    const CrossRank plain = dp_run({RankPlan{}, RankPlan{}}), slowed = dp_run({RankPlan{}, slow});
    SECTION("A's ranks waited 2% of their ready time: 0.8 s on a core would have waited 16 ms; 0.5 s is the load") {
        const RunDiff d =
            diff(with_times(plain, 1, 0.01, 0.49, 0.01, 0.49), with_times(slowed, 1, 0.5, 0.8, 0.01, 0.49));
        REQUIRE(d.delta_ms > 0);
        REQUIRE(load_explains_ms(d));
        CHECK(*load_explains_ms(d) == Approx(500 - 0.02 / 0.98 * 800));
        CHECK(d.verdict.find("than its time on a core would have at A's share of waiting (2%)") != std::string::npos);
        CHECK(diff_json(d)["b_core_wait"]["most_cpu_ms"].get<double>() == Approx(800));
    }
    SECTION(
        "A's ranks waited 20% of their ready time: 3 s of work on a core waits 0.75 s there; 0.5 s is not the load") {
        const RunDiff d = diff(with_times(plain, 1, 0.1, 0.4, 0.1, 0.4), with_times(slowed, 1, 0.5, 3.0, 0.1, 0.4));
        CHECK_FALSE(load_explains_ms(d));  // the waits alone: 0.4 s more than A's most, over half the slowdown
        CHECK(d.verdict.find("for a core") == std::string::npos);
    }
    SECTION("traces without the time on a core: the waits alone") {
        const RunDiff d = diff(with_times(plain, 1, 0.1, -1, 0.1, -1), with_times(slowed, 1, 0.5, -1, 0.1, -1));
        REQUIRE(load_explains_ms(d));
        CHECK(*load_explains_ms(d) == Approx(400));
        CHECK(d.verdict.find("longer for a core than A's most") != std::string::npos);
    }
    SECTION("the other way: B faster where A's rank waited for a core, said as A's load, not B's settings") {
        const RunDiff d = diff(with_times(slowed, 1, 0.5, -1, 0.1, -1), with_times(plain, 1, 0.1, -1, 0.1, -1));
        REQUIRE(d.delta_ms < 0);
        CHECK_FALSE(load_explains_ms(d));
        REQUIRE(a_load_explains_ms(d));
        CHECK(*a_load_explains_ms(d) == Approx(400));
        CHECK(d.verdict.find("at least half of B's speed-up is A's wait for a core") != std::string::npos);
    }
}

TEST_CASE("diff: memory rows in the categories' order, 0 B where a run held none, the peak of the sum last",
          "[cpu][diff]") {
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}}), b = dp_run({RankPlan{}, RankPlan{}});
    const std::map<std::string, int64_t> a_peaks = {{"grads", 12 << 20}, {"comm_buffers", 0}, {kPeakOfSum, 30 << 20}};
    const std::map<std::string, int64_t> b_peaks = {
        {"grads", 6 << 20}, {"comm_buffers", 18 << 20}, {kPeakOfSum, 31 << 20}};
    const RunDiff d = diff_runs({"A", &a, a_peaks}, {"B", &b, b_peaks});
    REQUIRE(d.memory.size() == 3);
    CHECK(d.memory[0].category == "grads");
    CHECK(d.memory[1].category == "comm_buffers");
    CHECK(d.memory[1].a_bytes == int64_t(0));  // held none: 0 B, not unknown
    CHECK(d.memory[2].category == kPeakOfSum);
    CHECK(d.memory[2].b_bytes == int64_t(31 << 20));
    // a run without categories (an imported trace) is unknown in every row
    const RunDiff unknown = diff_runs({"A", &a, {}}, {"B", &b, b_peaks});
    REQUIRE(!unknown.memory.empty());
    CHECK_FALSE(unknown.memory[0].a_bytes);
}

TEST_CASE("diff: waiting no straggler stands out for stays exposed communication", "[cpu][diff]") {
    // B's ranks 0 and 1 are slower by turns (0 in odd steps, 1 in even ones): the others wait for each, and blame
    // names neither
    const CrossRank a = dp_run({RankPlan{}, RankPlan{}, RankPlan{}, RankPlan{}}, 6);
    RankPlan odd, even;
    odd.odd_steps = 0.1, even.even_steps = 0.1;
    const CrossRank b = dp_run({odd, even, RankPlan{}, RankPlan{}}, 6);
    REQUIRE(!b.blame.stragglers.empty());
    REQUIRE_FALSE(b.blame.stragglers.front().stands_out);
    const RunDiff d = diff(a, b);
    const Cause* straggler = find_cause(d, CauseKind::straggler);
    CHECK((!straggler || std::abs(straggler->ms) < 0.01));
    const Cause* dp = find_cause(d, CauseKind::exposed_comm, "dp");
    REQUIRE(dp);
    CHECK(dp->ms == Approx(75).margin(0.01));  // three ranks of four wait 0.1 s a step: 75 ms on the ranks' mean
    // (the slow turns' compute is in no op row here: it is the unexplained part, 25 ms on the ranks' mean)
    for (const WhatIf& w : d.what_if) CHECK(w.name != "without the straggler");
}

TEST_CASE("diff: a step of other tokens is set beside its tokens per second", "[cpu][diff]") {
    const nlohmann::json a = {{"batch", 8}, {"seq", 128}, {"grad_accum", 2}, {"dp", 1}};
    nlohmann::json b = a;
    b["grad_accum"] = 8;
    const std::optional<WorkPerStep> w = work_per_step(a, b, 400, 1200);
    REQUIRE(w);
    CHECK(w->a_tokens == 2048);
    CHECK(w->b_tokens == 8192);
    CHECK(w->a_tokens_per_s == Approx(5120));
    CHECK(w->b_tokens_per_s == Approx(8192 / 1.2));
    // 3x the time for 4x the tokens: slower a step, faster per token
    CHECK_THAT(work_words(*w), Catch::Contains("4.00x the tokens a step (2048 -> 8192)") && Catch::Contains("+33.3%"));
    CHECK_FALSE(work_per_step(a, a, 400, 500));                 // the same tokens: the step says it
    CHECK_FALSE(work_per_step(a, nlohmann::json(), 400, 500));  // an imported run: unknown
    b.erase("seq");
    CHECK_FALSE(tokens_per_step(b));
}

TEST_CASE("diff: where only B names a straggler, the waiting it gained is the straggler's, A's own waits stay",
          "[cpu][diff]") {
    // A: ranks slower by turns (nobody named) wait 0.1 s a step; B: rank 2 slower by 0.3 s in every step (named)
    RankPlan odd, even, slow;
    odd.odd_steps = 0.1, even.even_steps = 0.1;
    slow.kinds[size_t(ComputeKind::gemm)] += 0.3;
    const CrossRank a = dp_run({odd, even, RankPlan{}, RankPlan{}}, 6);
    const CrossRank b = dp_run({RankPlan{}, RankPlan{}, slow, RankPlan{}}, 6);
    REQUIRE_FALSE(a.blame.stragglers.front().stands_out);
    REQUIRE(b.blame.stragglers.front().stands_out);
    const RunDiff d = diff(a, b);
    const Cause* straggler = find_cause(d, CauseKind::straggler);
    REQUIRE(straggler);
    // B's ranks wait 3 x 0.3 / 4 = 225 ms a step, A's 3 x 0.1 / 4 = 75: the straggler gained 150, not B's 225
    CHECK(straggler->ms == Approx(150).margin(0.5));
}

TEST_CASE("diff: one slow step among five or more does not set the noise, the middle steps' range does",
          "[cpu][diff]") {
    // A: 8 steps (7 steady) alternating +-10 ms, one of them 500 ms slower on every rank; B: 100 ms more gemm
    RankPlan a_plan, b_plan;
    a_plan.slow_step = b_plan.slow_step = 5, a_plan.slow_step_s = b_plan.slow_step_s = 0.5;
    b_plan.kinds[size_t(ComputeKind::gemm)] += 0.1;
    const CrossRank a = dp_run({a_plan, a_plan}, 8, 0.01), b = dp_run({b_plan, b_plan}, 8, 0.01);
    const RunDiff d = diff(a, b);
    CHECK(d.noise_within_ms == Approx(20).margin(0.5));  // the middle steps: +-10 ms; the whole range read 520
    CHECK_FALSE(d.within_noise);
    CHECK(d.delta_ms == Approx(100).margin(0.5));
    // under five steady steps the whole range stays
    const RunDiff short_runs = diff(dp_run({a_plan, a_plan}, 5, 0.01), dp_run({b_plan, b_plan}, 5, 0.01));
    CHECK(short_runs.noise_within_ms == Approx(520).margin(0.5));
}

TEST_CASE("diff: each run's communication a step, the part compute hid, and its collectives with their mean size",
          "[cpu][diff]") {
    const RunDiff d = diff(dp_run({RankPlan{}, RankPlan{}}), dp_run({RankPlan{}, RankPlan{}}));
    // one all-reduce of 1 MiB a step on each rank (dp_run), nothing under compute
    CHECK(d.a_comm.collectives == Approx(1.0));
    CHECK(d.a_comm.bytes == Approx(double(1 << 20)));
    CHECK(d.a_comm.hidden_ms == 0);
    CHECK(d.a_comm.ms > 0);
    const std::string said = communication_words(d);
    CHECK(said.find("communication a step (measured, the ranks' mean): A ") == 0);
    CHECK(said.find("0.00 of it hidden behind compute (0%), 1.0 collectives of 1.00 MiB on average") !=
          std::string::npos);
    CHECK(diff_json(d)["communication"]["a"]["collectives"] == Approx(1.0));
}
