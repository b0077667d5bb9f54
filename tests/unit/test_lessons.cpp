// Workshop lessons (app/lesson): the repository's lesson files load and launch-check; a malformed file is reported
// with its file and field while the others still load; the claim vocabulary holds, fails and is invalid where it
// should, on small hand-written reports; and the lessons' own claims fail on reports that contradict them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "app/lesson/lesson.h"
#include "common/core/check.h"

using namespace us::lesson;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A temporary directory of lesson files, removed at the end of the test.
struct TempLessonDir {
    fs::path dir;
    TempLessonDir() {
        dir = fs::temp_directory_path() / ("us-lessons-" + std::to_string(getpid()) + "-" + std::to_string(rand()));
        fs::create_directories(dir);
    }
    ~TempLessonDir() { fs::remove_all(dir); }
    void write(const std::string& name, const std::string& text) const { std::ofstream(dir / name) << text; }
};

json good_lesson() {
    return json::parse(R"({
      "order": 1, "title": "T", "section": "S", "look_at": "L", "formula": "F", "question": "Q",
      "runs": [{"label": "a", "ranks": 1, "args": ["--preset", "tiny", "--steps", "2"]},
               {"label": "b", "ranks": 2, "args": ["--preset", "tiny", "--steps", "2", "--dp", "2"]}],
      "views": ["memory"],
      "highlights": [{"view": "memory", "key": "rank.memory_peak_bytes.params", "run": "b", "note": "half with dp 2"},
                     {"view": "memory", "key": "rank.memory_peak_bytes.grads", "note": "the same in both"}],
      "claims": [{"says": "b is smaller", "left": {"run": "b", "key": "rank.memory_peak_bytes.params"}, "op": "<",
                  "right": {"run": "a", "key": "rank.memory_peak_bytes.params"}}]
    })");
}

// The error message of a lesson parsed from `j` (empty when it loads).
std::string parse_error(const json& j) {
    try {
        parse_lesson(j, "x", "x.json");
    } catch (const us::UserError& e) {
        return e.what();
    }
    return "";
}

// A report with two ranks (the numbers per rank given) and a few root keys.
json report(std::vector<double> params, std::vector<std::string> phases = {"forward", "forward"}) {
    json r;
    r["config"] = {{"pp", 2}, {"grad_accum", 4}};
    r["predicted"] = {{"params", 100}};
    r["pipeline"] = {{"bubble_fraction", 0.25}};
    for (size_t i = 0; i < params.size(); ++i)
        r["ranks"].push_back({{"rank", i},
                              {"memory_peak_bytes", {{"params", params[i]}, {"grads", 400}}},
                              {"memory_formula_bytes", {{"params", 400}, {"comm_buffers", nullptr}}},
                              {"memory_peak_phase", {{"activations", phases[i % phases.size()]}}}});
    return r;
}

Operand from(const std::string& run, std::vector<std::string> keys, std::string ranks = "max", double times = 1) {
    Operand o;
    o.run = run;
    o.keys = std::move(keys);
    o.ranks = std::move(ranks);
    o.times = times;
    return o;
}

Operand constant(double v) {
    Operand o;
    o.value = v;
    return o;
}

Claim claim(Operand left, Comparison op, Operand right, double tolerance = 0) {
    Claim c;
    c.says = "test claim";
    c.left = std::move(left);
    c.op = op;
    c.right = std::move(right);
    c.tolerance = tolerance;
    return c;
}

ClaimStatus status(const Claim& c, const std::map<std::string, json>& reports) {
    return evaluate_claim(c, reports).status;
}

// Sets every rank's key (a dotted path under the rank) to v.
void set_rank_key(json& rep, const std::string& path, const json& v) {
    std::string pointer = "/" + path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    for (auto& r : rep["ranks"]) r[json::json_pointer(pointer)] = v;
}

}  // namespace

TEST_CASE("The repository's lessons all load, with unique names and runs a laptop can launch", "[lessons]") {
    const LessonSet set = load_lessons(default_lessons_dir());
    for (const auto& e : set.errors) FAIL_CHECK(e.message);
    REQUIRE(set.errors.empty());
    REQUIRE(set.lessons.size() >= 12);
    std::set<std::string> names;
    std::set<int> orders;
    for (const auto& l : set.lessons) {
        INFO(l.name);
        CHECK(names.insert(l.name).second);
        CHECK(orders.insert(l.order).second);
        CHECK(!l.claims.empty());
        CHECK(l.runs.size() >= 1);
        CHECK(l.runs.size() <= 4);
        for (const auto& r : l.runs) CHECK(r.ranks <= 4);  // a two-core laptop: at most 4 ranks
    }
    for (const char* name : {"anatomy", "mixed-precision", "recompute", "grad-accum", "data-parallel", "zero",
                             "pipeline", "tensor-parallel", "context-parallel", "experts", "bottleneck", "cluster"})
        CHECK(find_lesson(set, name) != nullptr);
    REQUIRE(find_lesson(set, "bottleneck"));
    CHECK(!find_lesson(set, "bottleneck")->answer.empty());
    CHECK(find_lesson(set, "bottleneck")->formula_gives_answer);  // (pp - 1) / m names the setting to change
    CHECK(find_lesson(set, "no-such-lesson") == nullptr);
}

TEST_CASE("A lesson run's command is `ultrascope run -n RANKS` with its flags", "[lessons]") {
    LessonRun run;
    run.ranks = 2;
    run.args = {"--preset", "tiny", "--dp", "2"};
    CHECK(run_command_text(run) == "ultrascope run -n 2 --preset tiny --dp 2");
    CHECK(run_arguments(run) == std::vector<std::string>{"-n", "2", "--preset", "tiny", "--dp", "2"});
    run.nodes = us::app::NodeLinks{2, 0.5, 0, "cyclic"};
    CHECK(run_command_text(run) ==
          "ultrascope run -n 2 --nodes 2 --node-placement cyclic --inter-node-gbps 0.5 --preset tiny --dp 2");
}

TEST_CASE("A lesson's plan is the planner's figures for its model and layout", "[lessons]") {
    LessonPlan plan;
    plan.label = "p";
    plan.args = {"--preset", "tiny", "--dp", "4", "--zero", "1"};
    const json j = evaluate_lesson_plan(plan);
    CHECK(j.at("layout").at("dp") == 4);
    CHECK(j.at("layout").at("precision") == "fp32");  // the flags' precision (the engine's default), as the run's
    // ZeRO-1 on dp 4: the moments are 8N/4 = 2N bytes of the tiny model's N = 116480.
    CHECK(j.at("memory_per_gpu_bytes").at("optimizer_state").get<double>() == 2.0 * 116480);
    CHECK(plan_command_text(plan) == "ultrascope plan --gpu h100-sxm --preset tiny --dp 4 --zero 1");
    // Its figures are never "measured": memory is predicted, times the planner's model.
    const std::map<std::string, json> reports = {{"p", j}};
    CHECK(evaluate_claim(claim(from("p", {"memory_per_gpu_bytes.params"}), Comparison::greater, constant(0)), reports)
              .measured.source == FigureSource::predicted);
    CHECK(
        evaluate_claim(claim(from("p", {"step_time_s"}), Comparison::greater, constant(0)), reports).measured.source ==
        FigureSource::model);
    // A layout the planner cannot place is reported by the lesson's field.
    json l = good_lesson();
    l["plans"] = json::array({{{"label", "p"}, {"args", {"--preset", "tiny", "--tp", "3"}}}});
    CHECK_THAT(parse_error(l), Catch::Contains("plans[0].args"));
    l["plans"] = json::array({{{"label", "a"}, {"args", {"--preset", "tiny"}}}});
    CHECK_THAT(parse_error(l), Catch::Contains("another run or plan"));
}

TEST_CASE("Malformed lesson files are reported by file and field and the good ones still load", "[lessons]") {
    TempLessonDir tmp;
    tmp.write("good.json", good_lesson().dump());
    tmp.write("broken.json", "{ \"title\": ");
    json no_title = good_lesson();
    no_title.erase("title");
    tmp.write("no-title.json", no_title.dump());
    json bad_ranks = good_lesson();
    bad_ranks["runs"][1]["ranks"] = 3;  // dp 2 needs 2
    tmp.write("bad-ranks.json", bad_ranks.dump());
    tmp.write("not-a-lesson.txt", "ignored: not .json");

    const LessonSet set = load_lessons(tmp.dir);
    REQUIRE(set.lessons.size() == 1);
    CHECK(set.lessons[0].name == "good");
    REQUIRE(set.errors.size() == 3);
    auto message_of = [&](const std::string& file) {
        for (const auto& e : set.errors)
            if (fs::path(e.path).filename() == file) return e.message;
        return std::string("(no error)");
    };
    CHECK_THAT(message_of("broken.json"), Catch::Contains("broken.json") && Catch::Contains("not valid JSON"));
    CHECK_THAT(message_of("no-title.json"), Catch::Contains("no-title.json") && Catch::Contains("title: missing"));
    CHECK_THAT(message_of("bad-ranks.json"), Catch::Contains("runs[1].args") && Catch::Contains("needs 2"));

    CHECK_THROWS_AS(load_lesson_file(tmp.dir / "broken.json"), us::UserError);
    const LessonSet missing = load_lessons(tmp.dir / "absent");
    CHECK(missing.lessons.empty());
    REQUIRE(missing.errors.size() == 1);
    CHECK_THAT(missing.errors[0].message, Catch::Contains("absent"));
}

TEST_CASE("Each lesson field is checked, and the message names it", "[lessons]") {
    CHECK(parse_error(good_lesson()).empty());
    auto with = [](const std::string& pointer, const json& v) {
        json j = good_lesson();
        j[json::json_pointer(pointer)] = v;
        return parse_error(j);
    };
    CHECK_THAT(with("/views/0", "memroy"), Catch::Contains("views") && Catch::Contains("memroy"));
    CHECK_THAT(with("/runs/0/ranks", 0), Catch::Contains("runs[0].ranks"));
    CHECK_THAT(with("/runs/0/args/1", "huge"), Catch::Contains("runs[0].args") && Catch::Contains("huge"));
    CHECK_THAT(with("/runs/1/label", "a"), Catch::Contains("runs[1].label") && Catch::Contains("another run"));
    CHECK_THAT(with("/claims/0/op", "=<"), Catch::Contains("claims[0].op") && Catch::Contains("=<"));
    CHECK_THAT(with("/claims/0/left/run", "c"), Catch::Contains("claims[0].left.run") && Catch::Contains("'c'"));
    CHECK_THAT(with("/claims/0/right/ranks", "median"), Catch::Contains("claims[0].right.ranks"));
    CHECK_THAT(with("/claims/0/tolerance", 0.02), Catch::Contains("only ~ takes a tolerance"));
    CHECK_THAT(with("/highlights/0/view", "timeline"), Catch::Contains("highlights[0].view"));
    CHECK_THAT(with("/claim", json::array()), Catch::Contains("claim: unknown field"));
    // a formula that would give the answer away is shown with it, so there must be one
    CHECK_THAT(with("/formula_gives_answer", true),
               Catch::Contains("formula_gives_answer") && Catch::Contains("no answer"));
    CHECK(with("/formula_gives_answer", false).empty());
    CHECK_THAT(with("/runs", json::array()), Catch::Contains("runs: expected 1 to 4 entries"));
    // a run on emulated nodes (docs/nodes.md)
    CHECK(with("/runs/1/nodes", {{"count", 2}, {"inter_node_gbps", 1}, {"placement", "cyclic"}}).empty());
    CHECK_THAT(with("/runs/1/nodes", {{"count", 2}, {"placement", "random"}}),
               Catch::Contains("runs[1].nodes.placement") && Catch::Contains("random"));
    CHECK_THAT(with("/runs/1/nodes", {{"count", 2}, {"gbps", 1}}),
               Catch::Contains("runs[1].nodes.gbps: unknown field"));
    CHECK_THAT(with("/runs/1/nodes", {{"count", 3}}), Catch::Contains("do not split over 3 nodes"));
    // "A..B" reads the diff of two of the lesson's runs (lesson_diff.cpp)
    CHECK(with("/claims/0/left/run", "a..b").empty());
    CHECK_THAT(with("/claims/0/left/run", "a..c"), Catch::Contains("claims[0].left.run") && Catch::Contains("diff"));
    CHECK_THAT(with("/claims/0/left/run", "a..a"), Catch::Contains("and differ"));
    // what a claim needs of the machine: a claim of its own, without a when of its own
    const json needs = {{"says", "a core free"},
                        {"left", {{"run", "a"}, {"key", "core_sharing.0.cores"}}},
                        {"op", ">"},
                        {"right", {{"run", "a"}, {"key", "core_sharing.0.threads"}}}};
    CHECK(with("/claims/0/when", needs).empty());
    CHECK_THAT(with("/claims/0/when", json{{"says", "x"}}), Catch::Contains("claims[0].when: a claim needs"));
    json nested = needs;
    nested["when"] = needs;
    CHECK_THAT(with("/claims/0/when", nested), Catch::Contains("claims[0].when: a claim's when has no when"));
    json both_constant = good_lesson();
    both_constant["claims"][0]["left"] = {{"value", 1}};
    both_constant["claims"][0]["right"] = {{"value", 2}};
    CHECK_THAT(parse_error(both_constant), Catch::Contains("both sides are constants"));
}

TEST_CASE("Claims compare within a run and between runs, with tolerances and rank selection", "[lessons]") {
    const std::map<std::string, json> reports = {{"a", report({400, 400})}, {"b", report({200, 210})}};
    const Operand a_params = from("a", {"rank.memory_peak_bytes.params"});
    const Operand b_params = from("b", {"rank.memory_peak_bytes.params"});

    CHECK(status(claim(b_params, Comparison::less, a_params), reports) == ClaimStatus::held);
    CHECK(status(claim(a_params, Comparison::less, b_params), reports) == ClaimStatus::failed);
    CHECK(status(claim(b_params, Comparison::less_equal, from("b", {"rank.memory_peak_bytes.params"})), reports) ==
          ClaimStatus::held);
    CHECK(status(claim(b_params, Comparison::greater, from("b", {"rank.memory_peak_bytes.params"})), reports) ==
          ClaimStatus::failed);
    // Equal sides: the strict comparisons fail, the others hold.
    CHECK(status(claim(b_params, Comparison::less, b_params), reports) == ClaimStatus::failed);
    CHECK(status(claim(b_params, Comparison::greater_equal, b_params), reports) == ClaimStatus::held);
    CHECK(status(claim(b_params, Comparison::equal, b_params), reports) == ClaimStatus::held);
    CHECK(status(claim(b_params, Comparison::equal, from("a", {"rank.memory_peak_bytes.params"})), reports) ==
          ClaimStatus::failed);
    // max over b's ranks is 210: ~ half of a's 400 within 5% holds, within 2% fails.
    CHECK(status(claim(b_params, Comparison::approx, from("a", {"rank.memory_peak_bytes.params"}, "max", 0.5), 0.05),
                 reports) == ClaimStatus::held);
    CHECK(status(claim(b_params, Comparison::approx, from("a", {"rank.memory_peak_bytes.params"}, "max", 0.5), 0.02),
                 reports) == ClaimStatus::failed);
    // min, sum, mean and a rank number.
    CHECK(status(claim(from("b", {"rank.memory_peak_bytes.params"}, "min"), Comparison::equal, constant(200)),
                 reports) == ClaimStatus::held);
    CHECK(status(claim(from("b", {"rank.memory_peak_bytes.params"}, "sum"), Comparison::equal, constant(410)),
                 reports) == ClaimStatus::held);
    CHECK(status(claim(from("b", {"rank.memory_peak_bytes.params"}, "mean"), Comparison::equal, constant(205)),
                 reports) == ClaimStatus::held);
    CHECK(status(claim(from("b", {"rank.memory_peak_bytes.params"}, "1"), Comparison::equal, constant(210)), reports) ==
          ClaimStatus::held);
    // Keys sum per rank; root keys scale with times: params + grads = 4 x N on rank 0 of a.
    CHECK(status(claim(from("a", {"rank.memory_peak_bytes.params", "rank.memory_peak_bytes.grads"}, "0"),
                       Comparison::equal, from("a", {"predicted.params"}, "max", 8)),
                 reports) == ClaimStatus::held);
    // A claim over two runs' diff reads its causes under "A..B" (add_lesson_diffs puts it there), in seconds.
    std::map<std::string, json> with_diff = reports;
    with_diff["a..b"] = {{"by_cause_s", {{"exposed_comm", {{"total", 0.015}, {"dp", 0.012}}}}}};
    const ClaimResult dp_cause = evaluate_claim(
        claim(from("a..b", {"by_cause_s.exposed_comm.dp"}), Comparison::greater, constant(0.005)), with_diff);
    CHECK(dp_cause.status == ClaimStatus::held);
    CHECK_THAT(dp_cause.measured.shown, Catch::Contains("12.0 ms"));
    CHECK(status(claim(from("a..b", {"by_cause_s.bubble.pipeline"}), Comparison::greater, constant(0)), with_diff) ==
          ClaimStatus::invalid);
    // Settings are readable: config.pp.
    CHECK(status(claim(from("a", {"pipeline.bubble_fraction"}), Comparison::less, from("a", {"config.pp"})), reports) ==
          ClaimStatus::held);
}

TEST_CASE("A claim whose when fails is not checked here, says why, and is never counted as held", "[lessons]") {
    std::map<std::string, json> reports = {{"a", report({400, 400})}, {"b", report({200, 210})}};
    reports["a"]["core_sharing"] = json::array({{{"cores", 2}, {"threads", 2}}});
    Claim c = claim(from("b", {"rank.memory_peak_bytes.params"}), Comparison::greater,
                    from("a", {"rank.memory_peak_bytes.params"}));  // fails wherever it is checked
    c.says = "b keeps more than a";
    Claim needs =
        claim(from("a", {"core_sharing.0.cores"}), Comparison::greater, from("a", {"core_sharing.0.threads"}));
    needs.says = "a core free beside each rank's compute";
    c.when.push_back(needs);
    ClaimResult r = evaluate_claim(c, reports);
    CHECK(r.status == ClaimStatus::not_here);
    CHECK_THAT(r.explanation, Catch::Contains("not checked on this machine: it needs a core free beside each rank's "
                                              "compute, and here a: core_sharing.0.cores"));
    LessonCheck check;
    check.claims = {r};
    CHECK(check.held());                           // the lesson holds where it could be checked
    reports["a"]["core_sharing"][0]["cores"] = 4;  // a core free: checked, and it fails
    CHECK(status(c, reports) == ClaimStatus::failed);
    reports["a"].erase("core_sharing");  // the report does not say: the claim cannot be evaluated, not skipped
    CHECK(status(c, reports) == ClaimStatus::invalid);
}

TEST_CASE("A per-rank claim must hold on every rank and names the worst one", "[lessons]") {
    const std::map<std::string, json> reports = {{"b", report({200, 260})}};
    const Claim c = claim(from("b", {"rank.memory_peak_bytes.params"}, "each"), Comparison::approx,
                          from("b", {"predicted.params"}, "max", 2), 0.05);
    const ClaimResult r = evaluate_claim(c, reports);
    CHECK(r.status == ClaimStatus::failed);
    CHECK(r.worst_rank == 1);
    CHECK(r.measured.values == std::vector<double>{200, 260});
    CHECK(r.measured.source == FigureSource::measured);
    CHECK(r.expected.source == FigureSource::predicted);
    CHECK_THAT(r.explanation, Catch::Contains("does NOT hold") && Catch::Contains("rank 1"));

    const ClaimResult ok = evaluate_claim(claim(from("b", {"rank.memory_peak_bytes.params"}, "each"), Comparison::less,
                                                from("b", {"rank.memory_peak_bytes.grads"}, "each")),
                                          reports);
    CHECK(ok.status == ClaimStatus::held);
    CHECK(ok.worst_rank == 1);  // the closest to failing
    CHECK_THAT(ok.explanation, Catch::Contains("holds"));
}

TEST_CASE("Words compare with == on every rank", "[lessons]") {
    const std::map<std::string, json> same = {{"a", report({1, 1}, {"forward"})}};
    const std::map<std::string, json> mixed = {{"a", report({1, 1}, {"forward", "backward"})}};
    Operand forward;
    forward.word = "forward";
    const Claim c = claim(from("a", {"rank.memory_peak_phase.activations"}, "each"), Comparison::equal, forward);
    CHECK(status(c, same) == ClaimStatus::held);
    const ClaimResult r = evaluate_claim(c, mixed);
    CHECK(r.status == ClaimStatus::failed);
    CHECK(r.worst_rank == 1);
    // A word has no maximum.
    CHECK(status(claim(from("a", {"rank.memory_peak_phase.activations"}), Comparison::equal, forward), same) ==
          ClaimStatus::invalid);
}

TEST_CASE("A claim over a missing run, key, rank or a null value is invalid, with the reason", "[lessons]") {
    const std::map<std::string, json> reports = {{"a", report({400, 400})}};
    auto reason = [&](const Operand& left) {
        const ClaimResult r = evaluate_claim(claim(left, Comparison::less, constant(1)), reports);
        CHECK(r.status == ClaimStatus::invalid);
        return r.explanation;
    };
    CHECK_THAT(reason(from("z", {"rank.memory_peak_bytes.params"})), Catch::Contains("run 'z' has no report"));
    CHECK_THAT(reason(from("a", {"rank.memory_peak_bytes.parms"})), Catch::Contains("memory_peak_bytes.parms"));
    CHECK_THAT(reason(from("a", {"rank.memory_formula_bytes.comm_buffers"})), Catch::Contains("null"));
    CHECK_THAT(reason(from("a", {"rank.memory_peak_bytes.params"}, "7")), Catch::Contains("rank 7 does not exist"));
    CHECK_THAT(reason(from("a", {"pipeline"})), Catch::Contains("not a number"));
}

TEST_CASE("The lessons' claims fail on reports that contradict them", "[lessons]") {
    const LessonSet set = load_lessons(default_lessons_dir());
    const Lesson* zero = find_lesson(set, "zero");
    REQUIRE(zero);
    // Reports as ZeRO would produce them for N = 1000, dp 2: model states 12N, 10N, 8N per rank, ZeRO-3 sending 2x.
    auto zero_report = [](double params, double grads, double moments, double dp_bytes) {
        json r;
        r["predicted"] = {{"params", 1000}};
        for (int i = 0; i < 2; ++i)
            r["ranks"].push_back(
                {{"rank", i},
                 {"memory_peak_bytes",
                  {{"params", params}, {"grads", grads}, {"master_params", 0}, {"optimizer_state", moments}}},
                 {"comm_bytes", {{"dp", dp_bytes}}},
                 {"comm_bytes_predicted", {{"dp", dp_bytes}}}});
        return r;
    };
    std::map<std::string, json> reports = {{"zero1", zero_report(4000, 4000, 4000, 4000)},
                                           {"zero2", zero_report(4000, 2000, 4000, 4000)},
                                           {"zero3", zero_report(2000, 2000, 4000, 8000)}};
    LessonCheck check = check_lesson(*zero, reports);
    for (const auto& c : check.claims) INFO(c.explanation);
    CHECK(check.held());
    // ZeRO-3 that forgot to shard the parameters (16N/dp broken), and one that gathers nothing: each claim fails.
    reports["zero3"] = zero_report(4000, 2000, 4000, 8000);
    check = check_lesson(*zero, reports);
    CHECK(!check.held());
    CHECK(check.claims[2].status == ClaimStatus::failed);
    reports["zero3"] = zero_report(2000, 2000, 4000, 4000);
    check = check_lesson(*zero, reports);
    CHECK(check.claims[2].status == ClaimStatus::held);
    CHECK(check.claims[3].status == ClaimStatus::failed);
    // and one whose bytes are off the engine's walk of its gathers
    reports["zero3"] = zero_report(2000, 2000, 4000, 8000);
    reports["zero3"]["ranks"][1]["comm_bytes_predicted"]["dp"] = 7000;
    check = check_lesson(*zero, reports);
    CHECK(check.claims[3].status == ClaimStatus::held);
    CHECK(check.claims[4].status == ClaimStatus::failed);

    // Mixed precision: a bf16 run whose activations were not halved fails the activation claim.
    const Lesson* mp = find_lesson(set, "mixed-precision");
    REQUIRE(mp);
    json fp32 = report({400, 400}), bf16 = report({200, 200});
    set_rank_key(fp32, "activations_peak_bytes", 1000);
    set_rank_key(bf16, "activations_peak_bytes", 700);
    const Claim& activations = mp->claims.back();
    CHECK(status(activations, {{"fp32", fp32}, {"bf16", bf16}}) == ClaimStatus::failed);
    set_rank_key(bf16, "activations_peak_bytes", 550);
    CHECK(status(activations, {{"fp32", fp32}, {"bf16", bf16}}) == ClaimStatus::held);

    // Pipeline: a 1F1B that held all 4 micro-batches in flight breaks "<= pp".
    const Lesson* pipe = find_lesson(set, "pipeline");
    REQUIRE(pipe);
    json one_f_one_b = report({1, 1});
    set_rank_key(one_f_one_b, "micro_batches_in_flight", 4);
    CHECK(status(pipe->claims[1], {{"1f1b", one_f_one_b}}) == ClaimStatus::failed);
    set_rank_key(one_f_one_b, "micro_batches_in_flight", 2);
    CHECK(status(pipe->claims[1], {{"1f1b", one_f_one_b}}) == ClaimStatus::held);

    // Flash attention: a flash run that still kept the s x s probabilities keeps as much as naive.
    const Lesson* flash = find_lesson(set, "flash-attention");
    REQUIRE(flash);
    json naive = report({1, 1}), blockwise = report({1, 1});
    set_rank_key(naive, "activations_peak_bytes", 1000);
    set_rank_key(blockwise, "activations_peak_bytes", 990);
    CHECK(status(flash->claims[0], {{"naive", naive}, {"flash", blockwise}}) == ClaimStatus::failed);
    set_rank_key(blockwise, "activations_peak_bytes", 512);
    CHECK(status(flash->claims[0], {{"naive", naive}, {"flash", blockwise}}) == ClaimStatus::held);
}

// Issue 32: the pipeline lesson's "look:" notes stayed over a dp 2 x tp 2 run launched afterwards, and one showed its
// raw key ("look: pipeline.bubble_fraction_formula"). Notes belong to the lesson's runs and are written in words.
TEST_CASE("Lesson notes belong to the lesson's runs and are words, not report keys", "[lessons]") {
    const Lesson l = parse_lesson(good_lesson(), "x", "x.json");
    CHECK(highlights_of_run(l, "").empty());  // the views show a run that is not the lesson's: no notes
    const auto a = highlights_of_run(l, "a");
    REQUIRE(a.size() == 1);  // the note for every run; not run b's
    CHECK(a[0]->note == "the same in both");
    CHECK(highlights_of_run(l, "b").size() == 2);

    json no_note = good_lesson();
    no_note["highlights"][1].erase("note");
    CHECK_THAT(parse_error(no_note), Catch::Contains("highlights[1].note") && Catch::Contains("missing"));
    json key_as_note = good_lesson();
    key_as_note["highlights"][1]["note"] = "rank.memory_peak_bytes.grads";
    CHECK_THAT(parse_error(key_as_note), Catch::Contains("highlights[1].note") && Catch::Contains("in words"));
    // the repository's lessons: every note in words (they load, so none is missing or a key)
    const LessonSet set = load_lessons(default_lessons_dir());
    CHECK(set.errors.empty());
    for (const Lesson& lesson : set.lessons)
        for (const Highlight& h : lesson.highlights) {
            INFO(lesson.name << ": " << h.key);
            CHECK(h.note.find(h.key) == std::string::npos);
            CHECK(h.note.find('_') == std::string::npos);  // no snake_case key in a note
        }
}

TEST_CASE("A lesson run with a figure off its prediction and no explanation fails the check", "[lessons]") {
    const Lesson l = parse_lesson(good_lesson(), "x", "x.json");
    std::map<std::string, json> reports{{"a", report({400, 400})}, {"b", report({200, 200})}};
    for (auto& [label, r] : reports) r["misses"] = json::array();
    CHECK(check_lesson(l, reports).held());
    reports["b"]["misses"].push_back({{"what", "memory.activations"},
                                      {"rank", 0},
                                      {"measured", 8e6},
                                      {"predicted", 1e6},
                                      {"source", "formula"},
                                      {"ratio", 8},
                                      {"explained", "the textbook's dropout masks"}});
    CHECK(check_lesson(l, reports).held());  // explained: the check holds
    reports["b"]["misses"].push_back({{"what", "memory.activations"},
                                      {"rank", 1},
                                      {"measured", 8e6},
                                      {"predicted", 1e6},
                                      {"source", "predicted"},
                                      {"ratio", 8},
                                      {"explained", nullptr}});
    const LessonCheck check = check_lesson(l, reports);
    CHECK_FALSE(check.held());
    REQUIRE(check.claims.size() == l.claims.size() + 1);
    const ClaimResult& miss = check.claims.back();
    CHECK(miss.status == ClaimStatus::failed);
    CHECK_THAT(miss.says, Catch::Contains("run b"));
    CHECK_THAT(miss.measured.shown, Catch::Contains("rank 1 memory.activations"));
}
