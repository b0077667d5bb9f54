// The planner (app/plan, docs/planner.md): parameter counts against the published totals, the engine's presets
// through the engine's exact memory walk, the step-time model's monotonicities, the search's ordering, the JSON a
// GUI reads, the calibration's fits, and bad input (a clear message naming the field, exit code 2).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "app/plan/calibration.h"
#include "profiler/predict/model_shapes.h"
#include "profiler/predict/pipeline_sim.h"
#include "app/plan/planner.h"
#include "common/core/check.h"
#include "common/settings/config.h"
#include "profiler/predict/predict.h"
#include "test_util.h"

using namespace us;
using namespace us::plan;
using namespace us::predict;
namespace fs = std::filesystem;

namespace {

Layout layout(int dp, int tp, int pp, int mb = 1, int accum = 1) {
    Layout l;
    l.parallel.dp = dp, l.parallel.tp = tp, l.parallel.pp = pp, l.micro_batch = mb, l.grad_accum = accum,
    l.parallel.sp = tp > 1;
    return l;
}

std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = us::test::temp_path(name);
    std::ofstream(path) << text;
    return path;
}

std::string user_error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    return "(no error)";
}

// A 3-step run of the tiny preset with `flags`, its trace in a fresh folder `dir`: dir/run.ustrace.
std::string tiny_run_in(const std::string& dir, const std::string& flags) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string trace = dir + "/run.ustrace";
    const auto run = us::test::run_process(us::test::bin("ultrascope") + " run " + flags +
                                           " --preset tiny --steps 3 --trace " + trace);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    return trace;
}

}  // namespace

TEST_CASE("planner: parameter counts match the published totals", "[planner]") {
    struct Row {
        const char* name;
        double published, tolerance;
    };
    // Llama 3 (Dubey et al. 2024), GPT-3 175B as Narayanan et al. 2021 count it, Mixtral (Jiang et al. 2024): to the
    // published digits; GPT-3's smaller shapes are published rounded to two digits.
    for (const Row& r :
         {Row{"llama3-8b", 8.03e9, 0.001}, Row{"llama3-70b", 70.6e9, 0.001}, Row{"llama3-405b", 405.9e9, 0.001},
          Row{"gpt3-175b", 174.6e9, 0.001}, Row{"mixtral-8x7b", 46.7e9, 0.002}, Row{"gpt3-1.3b", 1.3e9, 0.04},
          Row{"gpt3-2.7b", 2.7e9, 0.04}, Row{"gpt3-6.7b", 6.7e9, 0.04}, Row{"gpt3-13b", 13.0e9, 0.04}}) {
        const ModelDesc m = load_model(r.name);
        INFO(r.name << ": " << m.num_params());
        CHECK(std::abs(double(m.num_params()) / r.published - 1.0) < r.tolerance);
        CHECK(m.published_params == r.published);
    }
    const ModelDesc mixtral = load_model("mixtral-8x7b");
    CHECK(std::abs(double(mixtral.active_params()) / 12.9e9 - 1.0) < 0.01);
}

TEST_CASE("planner: every engine preset counts parameters as the engine does", "[planner]") {
    for (const std::string& name : list_presets()) {
        TrainConfig cfg;
        apply_preset(cfg, name);
        const ModelDesc m = engine_preset_model(name);
        INFO(name);
        CHECK(m.family == ModelFamily::engine_gpt);
        CHECK(m.num_params() == cfg.model.num_params());
        CHECK(m.active_params() == cfg.model.active_params());
    }
}

TEST_CASE("planner: the known models name each model once (a preset named like a description file is one)",
          "[planner]") {
    const std::vector<std::string> names = known_models();
    const std::set<std::string> distinct(names.begin(), names.end());
    CHECK(distinct.size() == names.size());
    CHECK(distinct.count("gpt3-6.7b") == 1);  // a description file and an engine preset
    CHECK(distinct.count("tiny") == 1);
}

TEST_CASE("planner: an engine preset's memory is the engine's exact walk (predict::predict) of its busiest stage",
          "[planner]") {
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("small");
    for (Layout l : {layout(2, 1, 1, 8, 1), layout(1, 2, 1, 8, 2), layout(1, 1, 2, 8, 4)}) {
        l.bf16 = false;
        const MemoryEstimate e = estimate_memory(m, c, l);
        CHECK(e.kind == "predicted");
        int64_t best = -1;
        for (int s = 0; s < l.parallel.pp; ++s) {
            predict::PredictInput in;
            in.vocab = m.vocab, in.hidden = m.hidden, in.layers = m.layers, in.heads = m.heads, in.seq = m.seq;
            in.micro_batch = l.micro_batch, in.grad_accum = l.grad_accum, in.parallel.dp = l.parallel.dp,
            in.parallel.tp = l.parallel.tp, in.parallel.pp = l.parallel.pp;
            in.parallel.sp = l.parallel.sp, in.stage = s;
            const predict::Prediction p = predict::predict(in);
            if (p.memory_total() > best) {
                best = p.memory_total();
                for (int k = 0; k < kMemCategoryCount; ++k)
                    CHECK(e.bytes[size_t(k)] == (s == e.stage ? p.memory[size_t(k)].value_or(0) : e.bytes[size_t(k)]));
            }
        }
        CHECK(e.categories_total() == best);
        CHECK(e.reserved_bytes == c.reserved_bytes);
    }
}

TEST_CASE("planner: memory and time move the way the Playbook says", "[planner]") {
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("llama3-70b");
    // More tensor parallelism: less memory per GPU.
    int64_t previous = INT64_MAX;
    for (int tp : {1, 2, 4, 8}) {
        const PlanResult r = evaluate(m, c, layout(64 / tp, tp, 1));
        CHECK(r.memory.total() < previous);
        previous = r.memory.total();
    }
    // Higher ZeRO stages: less memory, never more.
    previous = INT64_MAX;
    for (int zero = 0; zero <= 3; ++zero) {
        Layout l = layout(8, 8, 1);
        l.parallel.zero = zero;
        const PlanResult r = evaluate(m, c, l);
        CHECK(r.memory.total() < previous);
        previous = r.memory.total();
    }
    // Recomputation: fewer saved activations, more time.
    Layout none = layout(4, 8, 2, 1, 8), full = none;
    full.recompute = Recompute::full;
    const PlanResult a = evaluate(m, c, none), b = evaluate(m, c, full);
    CHECK(b.memory.bytes[size_t(MemCategory::activations)] < a.memory.bytes[size_t(MemCategory::activations)]);
    CHECK(b.time.step_s > a.time.step_s);
    CHECK(b.time.recompute_s > 0);
    // More micro-batches: a smaller share of bubble; interleaving: smaller still; zero bubble: smaller again.
    Layout few = layout(2, 8, 4, 1, 4), many = layout(2, 8, 4, 1, 32);
    const PlanResult f = evaluate(m, c, few), g = evaluate(m, c, many);
    CHECK(g.time.bubble_s / g.time.step_s < f.time.bubble_s / f.time.step_s);
    Layout inter = many;
    inter.parallel.pp_schedule = PipelineSchedule::interleaved, inter.parallel.pp_chunks = 2;
    Layout zb = many;
    zb.parallel.pp_schedule = PipelineSchedule::zb1;
    CHECK(evaluate(m, c, inter).time.bubble_s < g.time.bubble_s);
    CHECK(evaluate(m, c, zb).time.bubble_s < g.time.bubble_s);
    // A tp group that leaves the node pays the slow link.
    const PlanResult in_node = evaluate(m, c, layout(2, 8, 1)), across = evaluate(m, c, layout(1, 16, 1));
    CHECK(across.time.tp_comm_s > in_node.time.tp_comm_s);
    // MFU stays a fraction.
    CHECK(a.mfu > 0);
    CHECK(a.mfu < 1);
}

TEST_CASE("planner: the search ranks fitting layouts first, fastest first, and says why the others lose", "[planner]") {
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("llama3-8b");
    SearchOptions o;
    o.gpus = 16;
    o.global_batch_sequences = 64;
    const SearchResult s = search(m, c, o);
    REQUIRE(s.ranked.size() > 10);
    CHECK(s.considered == int64_t(s.ranked.size()));
    CHECK(s.ranked.front().fits);
    CHECK(s.ranked.front().verdict == "best");
    bool seen_oom = false;
    for (size_t i = 1; i < s.ranked.size(); ++i) {
        const PlanResult &p = s.ranked[i - 1], &r = s.ranked[i];
        if (!r.fits) {
            seen_oom = true;
            CHECK(r.verdict.find("out of memory") == 0);
        } else {
            CHECK(!seen_oom);  // no fitting layout after one that does not fit
            CHECK(p.time.step_s <= r.time.step_s);
            CHECK((r.verdict.find("slower than the best") != std::string::npos || r.verdict.find("as fast as") == 0));
        }
        CHECK(r.layout.world() == 16);
        CHECK(r.layout.sequences_per_step() == 64);
    }
    CHECK(!s.pruned.empty());
}

TEST_CASE("planner: the JSON of a layout has what a GUI reads", "[planner]") {
    const ClusterDesc c = load_cluster("a100-80gb");
    const ModelDesc m = load_model("gpt3-175b");
    Layout l = layout(8, 8, 16, 1, 64);
    l.parallel.zero = 1, l.recompute = Recompute::full, l.parallel.pp_schedule = PipelineSchedule::interleaved,
    l.parallel.pp_chunks = 2;
    check_layout(m, c, l, 1024);
    const nlohmann::json j = plan_json(m, c, evaluate(m, c, l));
    for (const char* key : {"fits", "memory_per_gpu_bytes", "step_time_s", "tokens_per_s", "mfu", "time_s", "layout",
                            "memory_kind", "memory_total_bytes", "verdict"})
        CHECK(j.contains(key));
    for (auto name : kMemCategoryNames) CHECK(j["memory_per_gpu_bytes"].contains(std::string(name)));
    for (const char* piece : {"gemm", "attention", "recompute", "tp_comm", "bubble", "dp_comm_exposed", "optimizer"})
        CHECK(j["time_s"].contains(piece));
    CHECK(j["memory_kind"] == "formula");
    CHECK(j["fits"].get<bool>());
    double sum = 0;
    for (const char* piece : {"gemm", "attention", "other_ops", "recompute", "tp_comm", "cp_comm_exposed", "ep_comm",
                              "pp_comm", "bubble", "dp_comm_exposed", "optimizer", "overlap_slowdown"})
        sum += j["time_s"][piece].get<double>();
    CHECK(std::abs(sum / j["step_time_s"].get<double>() - 1.0) < 1e-9);  // the pieces add up to the step
}

TEST_CASE("planner: bad layouts, models and clusters get a message naming the field", "[planner]") {
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("llama3-8b");
    CHECK(user_error_of([&] { check_layout(m, c, layout(1, 3, 1), 3); }).find("--tp 3") != std::string::npos);
    // Uneven stages are allowed for other models while each stage keeps two layers; the engine cuts equal ones.
    CHECK(user_error_of([&] { check_layout(m, c, layout(1, 1, 20), 20); }).find("layers") != std::string::npos);
    CHECK(user_error_of([&] { check_layout(m, c, layout(1, 1, 5), 5); }) == "(no error)");
    CHECK(user_error_of([&] { check_layout(load_model("small"), c, layout(1, 1, 3), 3); }).find("layers") !=
          std::string::npos);
    Layout cp = layout(1, 1, 1);
    cp.parallel.cp = 3;
    CHECK(user_error_of([&] { check_layout(m, c, cp, 3); }).find("--cp 3") != std::string::npos);
    CHECK(user_error_of([&] { check_layout(m, c, layout(20000, 1, 1), 20000); }).find("more than cluster") !=
          std::string::npos);
    Layout ep = layout(2, 1, 1);
    ep.parallel.ep = 2;
    CHECK(user_error_of([&] { check_layout(m, c, ep, 2); }).find("no experts") != std::string::npos);
    const ModelDesc mixtral = load_model("mixtral-8x7b");
    Layout ep3 = layout(3, 1, 1);
    ep3.parallel.ep = 3;
    CHECK(user_error_of([&] { check_layout(mixtral, c, ep3, 3); }).find("experts") != std::string::npos);
    CHECK(user_error_of([&] { load_model("llama9-1t"); }).find("unknown model 'llama9-1t'") != std::string::npos);
    CHECK(user_error_of([&] { load_cluster("tpu-v9"); }).find("unknown GPU 'tpu-v9'") != std::string::npos);
    const std::string missing = write_file("plan-missing.json", R"({"name": "x", "family": "llama", "vocab": 100})");
    CHECK(user_error_of([&] { load_model(missing); }).find("missing field 'hidden'") != std::string::npos);
    const std::string wrong = write_file("plan-wrong.json", R"({"name": "x", "family": "llama", "vocab": 100,
        "hidden": "big", "layers": 2, "heads": 2, "seq": 8})");
    const std::string msg = user_error_of([&] { load_model(wrong); });
    CHECK(msg.find("'hidden'") != std::string::npos);
    CHECK(msg.find(wrong) != std::string::npos);
    // Sizes that are no model: beyond the bounds the engine's flags have, or a width the heads do not divide.
    const std::string huge = write_file("plan-huge.json", R"({"name": "x", "family": "llama", "vocab": 100,
        "hidden": 1073741824, "layers": 2, "heads": 2, "seq": 8})");
    CHECK(user_error_of([&] { load_model(huge); }).find("'hidden' 1073741824 must be between 1 and 131072") !=
          std::string::npos);
    ModelDesc overridden = load_model("llama3-8b");
    overridden.heads = 0;
    CHECK(user_error_of([&] { check_model(overridden, "--model llama3-8b"); }).find("'heads' 0 must be between") !=
          std::string::npos);
    overridden = load_model("llama3-8b");
    overridden.heads = 7;
    CHECK(user_error_of([&] { check_model(overridden, "--model llama3-8b"); }).find("not divisible") !=
          std::string::npos);
    overridden = load_model("llama3-8b");
    overridden.layers = 4096, overridden.hidden = 1 << 17, overridden.ffn_hidden = 1 << 21;
    CHECK(user_error_of([&] { check_model(overridden, "--model llama3-8b"); }).find("parameters") != std::string::npos);
    const std::string not_json = write_file("plan-broken.json", "{ nope");
    CHECK(user_error_of([&] { load_cluster(not_json); }).find("not valid JSON") != std::string::npos);
    const std::string bad_cluster = write_file("plan-cluster.json", R"({"name": "x", "gpu": {"name": "g",
        "peak_flops_fp32": 1e12, "memory_bytes": 1000, "memory_bandwidth": 1e9}, "gpus_per_node": 8,
        "intra_node": {"bandwidth": -1}})");
    CHECK(user_error_of([&] { load_cluster(bad_cluster); }).find("'bandwidth'") != std::string::npos);
}

TEST_CASE("planner: the command line evaluates, searches, and exits 2 on bad input", "[planner]") {
    const std::string u = us::test::bin("ultrascope");
    const auto one = us::test::run_process(u + " plan --model llama3-8b --gpu h100-sxm --dp 2 --tp 4 --sp --json");
    INFO(one.output);
    REQUIRE(one.exit_code == 0);
    const auto j = nlohmann::json::parse(one.output);
    CHECK(j["layout"]["gpus"] == 8);
    CHECK(j["memory_per_gpu_bytes"]["params"].get<int64_t>() > 0);
    const auto found = us::test::run_process(u +
                                             " plan --model llama3-8b --gpu a100-80gb --gpus 8 --global-batch-tokens "
                                             "1048576 --top 3");
    INFO(found.output);
    CHECK(found.exit_code == 0);
    CHECK(found.output.find("best") != std::string::npos);
    const auto preset = us::test::run_process(u + " plan --preset small --tp 2 --precision fp32");
    CHECK(preset.exit_code == 0);
    CHECK(preset.output.find("predicted (the engine's exact walk)") != std::string::npos);
    for (const char* bad : {" plan --model nope --gpus 8 --global-batch 8", " plan --model llama3-8b --tp 3",
                            " plan --model llama3-8b --gpu h100-sxm --gpus 1000000 --global-batch 8",
                            " plan --model llama3-8b --cluster /nonexistent.json --dp 2"}) {
        const auto r = us::test::run_process(u + bad);
        INFO(bad << "\n" << r.output);
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("error:") != std::string::npos);
    }
}

TEST_CASE("planner: calibration fits the alpha-beta model and interpolates GEMM efficiency", "[planner]") {
    // Synthetic timings from a known link: latency 20 us per hop, 5 GB/s.
    std::vector<CollectiveSample> samples;
    for (double bytes = 4096; bytes <= 8e6; bytes *= 2)
        for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
            const bool ar = std::string(op) == "all_reduce";
            samples.push_back({op, 2, bytes, (ar ? 2 : 1) * 20e-6 + (ar ? 1.0 : 0.5) * bytes / 5e9});
        }
    const Link link = fit_link(samples);
    CHECK(std::abs(link.latency / 20e-6 - 1) < 1e-6);
    CHECK(std::abs(link.bandwidth / 5e9 - 1) < 1e-6);
    CHECK(std::abs(all_reduce_s(1e6, 2, link) - (2 * 20e-6 + 1e6 / 5e9)) < 1e-12);
    CHECK(user_error_of([&] { fit_link({samples[0]}); }).find("at least 2") != std::string::npos);
    const auto parsed = parse_collective_samples(
        "mpirun noise\n{\"op\": \"all_gather\", \"ranks\": 2, \"bytes\": 4096, "
        "\"median_s\": 0.001, \"min_s\": 0.0009}\n");
    REQUIRE(parsed.size() == 1);
    CHECK(parsed[0].op == "all_gather");
    ClusterDesc c;
    c.gemm_efficiency = {{1e6, 0.2}, {1e8, 0.6}};
    CHECK(c.gemm_eff(1e5) == 0.2);
    CHECK(std::abs(c.gemm_eff(1e7) - 0.4) < 1e-12);  // halfway in log FLOPs
    CHECK(c.gemm_eff(1e9) == 0.6);
}

TEST_CASE("planner: the pipeline is simulated with each stage's own costs", "[planner]") {
    // pp 2, 1F1B, 4 micro-batches; the last stage (the head) twice as slow as the first. Worked by hand: stage 1
    // starts after stage 0's first forward (1), then runs its 4 x (2 + 4) back to back, and stage 0's last
    // backward (2) follows: 1 + 24 + 2 = 27. Charging both stages the slower one's costs gives (m + pp - 1) 6 = 30.
    const PipelineShape shape{2, 4, 1};
    const Schedule s = make_schedule(PipelineSchedule::one_f_one_b, shape);
    const PipelineTiming t = simulate_pipeline(s, shape, {{1, 2, 1}, {2, 4, 2}}, 0.0);
    CHECK(t.makespan == Approx(27));
    CHECK(t.busy[0] == Approx(12));
    CHECK(t.busy[1] == Approx(24));
    CHECK(simulate_schedule(s, shape, 2, 4).makespan == Approx(30));
    // Equal costs: the engine's own simulation, for every schedule.
    for (const char* name : {"afab", "1f1b", "zb1"}) {
        const Schedule e = make_schedule(parse_pipeline_schedule(name), shape);
        CHECK(simulate_pipeline(e, shape, {{1, 2, 1}, {1, 2, 1}}, 0.0).makespan ==
              Approx(simulate_schedule(e, shape, 1, 2).makespan));
    }
    const PipelineShape inter{2, 4, 2};
    const Schedule si = make_schedule(PipelineSchedule::interleaved, inter);
    CHECK(simulate_pipeline(si, inter, std::vector<VirtualStageCost>(4, {1, 2, 1}), 0.0).makespan ==
          Approx(simulate_schedule(si, inter, 2, 4).makespan));
    // A transfer on each hand-over between ranks lengthens the critical path by one per hop on it.
    CHECK(simulate_pipeline(s, shape, {{1, 2, 1}, {2, 4, 2}}, 0.5).makespan > 27.9);
    CHECK(user_error_of([&] {
              simulate_pipeline(s, shape, {{1, 2, 1}}, 0.0);
          }).find("virtual stages") != std::string::npos);

    // In the step-time model: the small preset on pp 2. The stage that ends the step waits for the other (a
    // bubble), and the pieces still add up to the step.
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("small");
    Layout l = layout(1, 1, 2, 8, 4);
    l.bf16 = false;
    const PlanResult r = evaluate(m, c, l);
    CHECK(r.time.bubble_s > 0);
    CHECK(r.time.step_s == Approx(r.time.gemm_s + r.time.attention_s + r.time.other_ops_s + r.time.recompute_s +
                                  r.time.tp_comm_s + r.time.cp_comm_exposed_s + r.time.ep_comm_s + r.time.pp_comm_s +
                                  r.time.bubble_s + r.time.dp_comm_exposed_s + r.time.optimizer_s));
}

TEST_CASE("planner: selective recomputation, the cp ring and ZeRO-3 cost what this engine does", "[planner]") {
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("small");
    Layout none = layout(2, 1, 1, 8, 1);
    none.bf16 = false;
    Layout selective = none;
    selective.recompute = Recompute::selective;
    const StepPieces a = evaluate(m, c, none).time, b = evaluate(m, c, selective).time;
    // The naive kernel's backward is twice its forward either way; selective adds QK^T and the softmax again (half
    // the forward's products), once: not a second, blockwise-style 2.5x backward on top.
    CHECK(b.attention_s == Approx(a.attention_s));
    CHECK(b.recompute_s == Approx(0.5 * a.attention_s / 3));
    // The ring: the last fp32 key/value gradient block of every layer's backward waits whole.
    Layout cp = layout(1, 1, 1, 4, 1);
    cp.parallel.cp = 2, cp.bf16 = false;
    ModelDesc longer = m;
    longer.seq = 256;
    const PlanResult ring = evaluate(longer, c, cp);
    const RankShapes rs = rank_shapes(longer, cp, 0);
    const double grad_block = send_s(double(rs.T) * double(rs.qkv_width - rs.attn_width) * 4, c.intra_node);
    CHECK(ring.time.cp_comm_exposed_s >= double(longer.layers) * grad_block * 0.999);
    // ZeRO-3 keeps only its shard (no gather after the optimizer) but waits for the first gathers of each pass.
    Layout z2 = none, z3 = none;
    z2.parallel.zero = 2, z3.parallel.zero = 3;
    const StepPieces p2 = evaluate(m, c, z2).time, p3 = evaluate(m, c, z3).time;
    CHECK(p3.dp_comm_exposed_s > 0);
    CHECK(p3.optimizer_s == Approx(p2.optimizer_s));
}

TEST_CASE("planner: a blockwise kernel on short blocks runs at the cluster file's fraction of its efficiency",
          "[planner]") {
    // h100-sxm's table (FlashAttention-2's causal forward on an H100 over its plateau): 0.78 at 1,024 keys, 1 from
    // 16K on, interpolated in log keys between rows, clamped outside. The keys of a call: the sequence, or s/cp.
    const ClusterDesc c = load_cluster("h100-sxm");
    REQUIRE(c.attention_length_efficiency.size() == 6);
    CHECK(c.attention_length_factor(1024) == Approx(0.78));
    CHECK(c.attention_length_factor(1 << 20) == Approx(1.0));
    CHECK(c.attention_length_factor(64) == Approx(0.57));
    CHECK(c.attention_length_factor(std::sqrt(1024.0 * 2048.0)) == Approx((0.78 + 0.89) / 2));
    ModelDesc m = load_model("llama3-8b");
    m.seq = 8192;
    Layout whole = layout(1, 8, 1, 1, 1), ring = whole;
    whole.flash = true;
    ring.parallel.cp = 8;  // tp 8 x cp 8: the ring runs blocks of 1,024 keys
    ClusterDesc flat = c;
    flat.attention_length_efficiency.clear();
    const auto attention = [&](const ClusterDesc& cl, const Layout& l) { return evaluate(m, cl, l).time.attention_s; };
    CHECK(attention(c, whole) == Approx(attention(flat, whole) / 0.99));
    CHECK(attention(c, ring) == Approx(attention(flat, ring) / 0.78));
    // The table travels through a machine file; calibration measures this machine's own kernel and drops it.
    CHECK(cluster_from_json(cluster_to_json(c), "t").attention_length_efficiency == c.attention_length_efficiency);
    const std::string bad = write_file("plan-length.json", R"({"name": "x", "gpu": {"name": "g",
        "peak_flops_fp32": 1e12, "memory_bytes": 1000, "memory_bandwidth": 1e9}, "gpus_per_node": 8,
        "intra_node": {"bandwidth": 1e11}, "inter_node": {"bandwidth": 1e10},
        "op_costs": {"attention_length_efficiency": [[1024, 0]]}})");
    CHECK(user_error_of([&] { load_cluster(bad); }).find("'attention_length_efficiency' row [1024,0]") !=
          std::string::npos);
}

TEST_CASE("planner: compute beside a hidden transfer runs the cluster file's overlap_slowdown longer", "[planner]") {
    // h100-sxm: 0.189, the average slowdown Lee et al. 2025 measured on compute overlapped with communication. Llama 3
    // 8B at 32K on 64 GPUs, tp 8 x cp 4 ring x dp 2, no pipeline: the ring hides key/value blocks behind the
    // attention, the data-parallel reduction hides behind the backward; each hidden second costs 0.189 s of compute.
    const ClusterDesc c = load_cluster("h100-sxm");
    REQUIRE(c.overlap_slowdown == Approx(0.189));
    ClusterDesc none = c;
    none.overlap_slowdown = 0;
    ModelDesc m = load_model("llama3-8b");
    m.seq = 32768;
    Layout l = layout(2, 8, 1, 1, 4);
    l.parallel.cp = 4, l.flash = true, l.bf16 = true;
    check_layout(m, c, l, 64);
    const StepPieces a = evaluate(m, none, l).time, b = evaluate(m, c, l).time;
    REQUIRE(a.cp_comm_hidden_s > 0);
    REQUIRE(a.dp_comm_hidden_s > 0);
    CHECK(a.overlap_slowdown_s == 0);
    CHECK(b.cp_comm_hidden_s == Approx(a.cp_comm_hidden_s));
    CHECK(b.dp_comm_hidden_s == Approx(a.dp_comm_hidden_s));
    CHECK(b.overlap_slowdown_s == Approx(0.189 * (a.cp_comm_hidden_s + a.dp_comm_hidden_s)));
    CHECK(b.step_s == Approx(a.step_s + b.overlap_slowdown_s));
    CHECK(b.compute_busy_s == Approx(a.compute_busy_s + b.overlap_slowdown_s));
    CHECK(b.attention_s == Approx(a.attention_s));  // the kernels' own work: the slowdown is a piece of its own
    // Nothing hidden, nothing charged: the same layout as all-gathers, the gradients reduced after the backward.
    Layout exposed = l;
    exposed.parallel.cp_comm = CpComm::allgather, exposed.parallel.overlap = false;
    CHECK(evaluate(m, c, exposed).time.overlap_slowdown_s == 0);
    // With a pipeline the slower attention lengthens each slot of the schedule: the step grows by more than the
    // critical stage's own slowdown, since the bubble is made of the other stages' slots.
    Layout piped = l;
    piped.parallel.dp = 1, piped.parallel.pp = 4, piped.grad_accum = 8;
    const StepPieces pa = evaluate(m, none, piped).time, pb = evaluate(m, c, piped).time;
    CHECK(pb.overlap_slowdown_s > 0);
    CHECK(pb.bubble_s > pa.bubble_s);
    CHECK(pb.step_s > pa.step_s + pb.overlap_slowdown_s);
    // The figure travels through a machine file; out of [0, 1) it is refused, naming the field.
    CHECK(cluster_from_json(cluster_to_json(c), "t").overlap_slowdown == c.overlap_slowdown);
    const std::string bad = write_file("plan-overlap.json", R"({"name": "x", "gpu": {"name": "g",
        "peak_flops_fp32": 1e12, "memory_bytes": 1000, "memory_bandwidth": 1e9}, "gpus_per_node": 8,
        "intra_node": {"bandwidth": 1e11}, "inter_node": {"bandwidth": 1e10}, "op_costs": {"overlap_slowdown": 1.5}})");
    CHECK(user_error_of([&] { load_cluster(bad); }).find("'overlap_slowdown' must be in [0, 1)") != std::string::npos);
}

TEST_CASE("planner: causal attention is charged the work its kernel executes, one convention with calibration",
          "[planner]") {
    // The engine's recorded FLOPs, converted to what runs, equal the visible (query, key) pairs counted one by one:
    // the naive kernel records the whole square, a blockwise one every chunk pair at or below the diagonal whole.
    for (const int64_t seq : {256, 1000, 4096})
        for (const int cp : {1, 2, 4})
            for (const bool flash : {false, true})
                for (const char* balance : {"zigzag", "contiguous"}) {
                    Layout l = layout(1, 1, 1);
                    l.parallel.cp = cp, l.flash = flash, l.parallel.cp_balance = parse_cp_balance(balance);
                    if (!flash && cp == 1 && std::string(balance) == "contiguous") continue;
                    double visible = 0;
                    for (int64_t q = 0; q < seq; ++q) visible += double(q + 1);
                    const bool blockwise = flash || cp > 1;
                    const int64_t n = blockwise ? cp * (cp > 1 && std::string(balance) == "zigzag" ? 2 : 1) : seq;
                    const double chunk = double(seq) / double(n);
                    const double recorded =
                        blockwise ? double(n * (n + 1) / 2) * chunk * chunk : double(seq) * double(seq);
                    INFO("seq " << seq << ", cp " << cp << ", flash " << flash << ", " << balance);
                    CHECK(recorded * executed_over_recorded_attention(l, seq, true) == Approx(visible));
                    // a GPU's naive kernel multiplies the whole square: nothing to convert
                    if (!blockwise) CHECK(executed_over_recorded_attention(l, seq, false) == 1.0);
                }
    // Prediction: on a GPU the blockwise kernel is charged the visible half of what the naive kernel multiplies; on a
    // calibrated CPU machine both skip the masked keys, so both are charged the same.
    ModelDesc m = load_model("small");
    m.seq = 1024;
    Layout naive = layout(1, 1, 1, 4, 1), flash = naive;
    flash.flash = true;
    ClusterDesc gpu = load_cluster("h100-sxm");
    gpu.attention_length_efficiency.clear();  // the blocks' length: its own test below
    const double half = (1024.0 + 1) / (2 * 1024.0);
    CHECK(evaluate(m, gpu, flash).time.attention_s / 3.5 ==
          Approx(half * evaluate(m, gpu, naive).time.attention_s / 3));
    ClusterDesc cpu = gpu;
    cpu.naive_attention_skips_masked = true;
    CHECK(evaluate(m, cpu, naive).time.attention_s == Approx(half * evaluate(m, gpu, naive).time.attention_s));
    CHECK(evaluate(m, cpu, flash).time.attention_s / 3.5 == Approx(evaluate(m, cpu, naive).time.attention_s / 3));
    // The flag travels through a machine file, and a calibrated file without it means the CPU engine's kernel.
    CHECK(cluster_from_json(cluster_to_json(cpu), "t").naive_attention_skips_masked);
    nlohmann::json calibrated = cluster_to_json(gpu);
    calibrated["calibrated"] = true;
    calibrated["op_costs"].erase("naive_attention_skips_masked");
    CHECK(cluster_from_json(calibrated, "t").naive_attention_skips_masked);
    CHECK_FALSE(cluster_from_json(cluster_to_json(gpu), "t").naive_attention_skips_masked);
}

TEST_CASE("planner: ultrascope report puts the planner's prediction beside the measured run", "[planner][app]") {
    const std::string u = us::test::bin("ultrascope");
    const std::string dir = us::test::temp_path("report-planner");
    const std::string trace = tiny_run_in(dir, "-n 1");
    // A machine file as `ultrascope calibrate` writes one (its figures made up: the comparison only reads them).
    ClusterDesc c = load_cluster("h100-sxm");
    c.calibrated = true, c.gpus_per_node = 2, c.nodes = 1, c.peak_flops_fp32 = c.peak_flops_bf16 = 50e9;
    c.default_precision = "fp32";
    const std::string machine = write_file("report-machine.json", cluster_to_json(c).dump());
    const auto rep = us::test::run_process(u + " report " + trace + " --json --cluster " + machine);
    INFO(rep.output);
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output)["planner"];
    CHECK(j["cluster"] == machine);
    CHECK(j["step_time_s"]["model"].get<double>() > 0);
    CHECK(j["step_time_s"]["measured_best"].get<double>() > 0);
    CHECK(j["step_time_s"]["measured_best"].get<double>() <= j["step_time_s"]["measured_mean"].get<double>() * 1.0001);
    CHECK(j["tokens_per_s"]["derived"].get<double>() > 0);
    CHECK(j["pieces_s"]["gemm"]["measured"].get<double>() > 0);
    // Memory is the engine's exact walk: equal to the measured peaks on this one-rank run.
    CHECK(j["memory"]["kind"] == "predicted");
    CHECK(j["memory"]["bytes"]["params"]["predicted"] == j["memory"]["bytes"]["params"]["measured"]);
    CHECK(j["memory"]["modelled_sum_predicted_bytes"] == j["memory"]["modelled_sum_measured_bytes"]);
    // The text names what each figure is.
    const auto text = us::test::run_process(u + " report " + trace + " --cluster " + machine);
    CHECK(text.output.find("Planner (ultrascope plan") != std::string::npos);
    CHECK(text.output.find("best steady step") != std::string::npos);
    // No machine file here: memory still compared, and how to make one said.
    const auto bare = us::test::run_process("cd " + dir + " && " + u + " report run.ustrace --json");
    REQUIRE(bare.exit_code == 0);
    const auto k = nlohmann::json::parse(bare.output)["planner"];
    CHECK(k["cluster"].is_null());
    CHECK(k["no_cluster"].get<std::string>().find("ultrascope calibrate") != std::string::npos);
    CHECK(!k.contains("step_time_s"));
    CHECK(k["memory"]["bytes"]["params"]["predicted"].get<int64_t>() > 0);
    // ./machine.json is picked up when present.
    fs::copy_file(machine, dir + "/machine.json");
    const auto found = us::test::run_process("cd " + dir + " && " + u + " report run.ustrace --json");
    CHECK(nlohmann::json::parse(found.output)["planner"]["cluster"] == "machine.json");
    // A machine file that is not there: exit 2, named.
    const auto bad = us::test::run_process(u + " report " + trace + " --cluster /nonexistent/machine.json");
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("--cluster") != std::string::npos);
}

TEST_CASE("planner: a run's recorded hosts set the nodes its links are priced on, not the machine file's",
          "[planner][app][nodes]") {
    const std::string u = us::test::bin("ultrascope");
    const std::string trace = tiny_run_in(us::test::temp_path("report-planner-hosts"), "-n 2 --dp 2");
    // As `calibrate --nodes 2` writes on 2 cores: one core a node, the link between nodes 1000x slower.
    ClusterDesc c = load_cluster("h100-sxm");
    c.calibrated = true, c.gpus_per_node = 1, c.nodes = 2, c.peak_flops_fp32 = c.peak_flops_bf16 = 50e9;
    c.default_precision = "fp32";
    c.inter_node = {c.intra_node.bandwidth / 1000, c.intra_node.latency * 1000};
    const std::string slow = write_file("report-machine-nodes.json", cluster_to_json(c).dump());
    c.inter_node = c.intra_node;
    const std::string flat = write_file("report-machine-flat.json", cluster_to_json(c).dump());
    auto planner = [&](const std::string& machine) {
        const auto rep = us::test::run_process(u + " report " + trace + " --json --cluster " + machine);
        INFO(rep.output);
        REQUIRE(rep.exit_code == 0);
        return nlohmann::json::parse(rep.output)["planner"];
    };
    const auto on_nodes_file = planner(slow), on_flat_file = planner(flat);
    // The run's two ranks were on one host: its dp all-reduce never crossed the slow link.
    CHECK(on_nodes_file["hosts"].get<std::string>().rfind("1 host", 0) == 0);
    CHECK(on_nodes_file["step_time_s"]["model"].get<double>() ==
          Approx(on_flat_file["step_time_s"]["model"].get<double>()).epsilon(1e-9));
}

TEST_CASE("planner: published large-scale runs within 15%, one rule per source", "[planner]") {
    // Megatron-LM (Narayanan et al. 2021, Table 1): GPT on Selene's A100s, vocabulary 51,200, sequence 2,048;
    // (heads, hidden, layers, tp, pp, GPUs, batch, published % of peak). One rule for all ten rows: micro-batch 1,
    // 1F1B, full recomputation, no ZeRO, naive attention, the gradients reduced in fp32 after the backward (2021
    // Megatron-LM's data-parallel reduction), on assets/clusters/a100-selene-2021.json. Their FLOPs count the
    // recomputed forward: 96 B s l h^2 (1 + s/6h + V/16lh), and so does the throughput compared here.
    struct Megatron {
        int heads, hidden, layers, tp, pp, gpus, batch;
        double published;
    };
    const ClusterDesc selene = load_cluster("a100-selene-2021");
    for (const Megatron& r :
         {Megatron{24, 2304, 24, 1, 1, 32, 512, 0.44}, Megatron{32, 3072, 30, 2, 1, 64, 512, 0.44},
          Megatron{32, 4096, 36, 4, 1, 128, 512, 0.46}, Megatron{48, 6144, 40, 8, 1, 256, 1024, 0.43},
          Megatron{64, 8192, 48, 8, 2, 512, 1536, 0.44}, Megatron{80, 10240, 60, 8, 4, 1024, 1792, 0.45},
          Megatron{96, 12288, 80, 8, 8, 1536, 2304, 0.47}, Megatron{128, 16384, 96, 8, 16, 1920, 2160, 0.50},
          Megatron{128, 20480, 105, 8, 35, 2520, 2520, 0.52}, Megatron{160, 25600, 128, 8, 64, 3072, 3072, 0.52}}) {
        const ModelDesc m = engine_model("megatron", 51200, r.hidden, r.layers, r.heads, 2048, 0, 2, 1, 0);
        const int dp = r.gpus / (r.tp * r.pp);
        Layout l = layout(dp, r.tp, r.pp, 1, r.batch / dp);
        l.recompute = Recompute::full, l.bf16 = true, l.fp32_grad_accum = true, l.parallel.overlap = false;
        check_layout(m, selene, l, r.gpus);
        const PlanResult p = evaluate(m, selene, l);
        const double s = 2048, h = r.hidden, L = r.layers, V = 51200;
        const double achieved = p.tokens_per_s * 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)) /
                                (double(r.gpus) * selene.peak_flops_bf16);
        INFO("Megatron " << r.gpus << " GPUs, hidden " << r.hidden << ": planner " << achieved << " of peak, published "
                         << r.published);
        CHECK(std::abs(achieved / r.published - 1.0) <= 0.15);
        CHECK(p.fits);  // every configuration ran in 80 GB
    }
    // Llama 3 405B (Dubey et al. 2024, Table 4) on H100s: (GPUs, cp, dp, seq, micro-batches per pipeline, MFU). One
    // rule: tp 8 with sp, pp 16 interleaved x 2, ZeRO-1, micro-batch 1, no recomputation, flash attention, bf16, and
    // context parallelism as Meta runs it (section 3.3.2): keys and values all-gathered, the transfers exposed.
    struct Llama {
        int gpus, cp, dp, seq, accum;
        double mfu;
    };
    const ClusterDesc h100 = load_cluster("h100-sxm");
    for (const Llama& r : {Llama{8192, 1, 64, 8192, 32, 0.43}, Llama{16384, 1, 128, 8192, 16, 0.41},
                           Llama{16384, 16, 8, 131072, 16, 0.38}}) {
        ModelDesc m = load_model("llama3-405b");
        m.seq = r.seq;
        Layout l = layout(r.dp, 8, 16, 1, r.accum);
        l.parallel.cp = r.cp, l.parallel.pp_schedule = PipelineSchedule::interleaved, l.parallel.pp_chunks = 2,
        l.parallel.zero = 1, l.flash = true, l.bf16 = true;
        l.parallel.cp_comm = CpComm::allgather;
        check_layout(m, h100, l, r.gpus);
        const PlanResult p = evaluate(m, h100, l);
        INFO("Llama 3 405B on " << r.gpus << " GPUs, seq " << r.seq << ": planner MFU " << p.mfu << ", published "
                                << r.mfu);
        CHECK(std::abs(p.mfu / r.mfu - 1.0) <= 0.15);
    }
}

TEST_CASE("planner: the search's best layout for Llama 3 405B on 16K H100s is within the model's error of Meta's",
          "[planner]") {
    // Dubey et al. 2024, Table 4: 41% MFU on 16,384 H100s at 8K tokens, 16M tokens per step. The search may find a
    // faster layout than Meta ran, but not by more than the ±15% the published rows above hold (issue 32: once 1.36x,
    // on more communication "hidden" than the step). The whole search, as `ultrascope plan` runs it.
    ModelDesc m = load_model("llama3-405b");
    m.seq = 8192;
    SearchOptions o;
    o.gpus = 16384, o.global_batch_sequences = 16777216 / 8192;
    const SearchResult found = search(m, load_cluster("h100-sxm"), o);
    REQUIRE(!found.ranked.empty());
    const PlanResult& best = found.ranked.front();
    INFO("best: " << best.layout.describe() << " at MFU " << best.mfu << " (issue 32, docs/planner.md: the search)");
    REQUIRE(best.fits);
    CHECK(best.mfu / 0.41 <= 1.15);
    CHECK(best.mfu / 0.41 >= 0.85);
}

TEST_CASE("planner: cp as all-gathers exposes every transfer, where the ring hides them behind the attention",
          "[planner]") {
    // Llama 3 8B at 32K, tp 8 x cp 4 on 4 nodes (tp 8 fills each): the cp group crosses the
    // inter-node link. Per layer and micro-batch the all-gather moves every rank's keys and values in forward and again
    // in backward, and reduce-scatters their fp32 gradients: one fp32 gradient block fewer than the ring's (no last hop
    // back to the owner), none of it behind the attention.
    const ClusterDesc c = load_cluster("h100-sxm");
    ModelDesc m = load_model("llama3-8b");
    m.seq = 32768;
    Layout ring = layout(1, 8, 1, 1, 4);
    ring.parallel.cp = 4, ring.flash = true, ring.bf16 = true;
    Layout gathered = ring;
    gathered.parallel.cp_comm = CpComm::allgather;
    check_layout(m, c, gathered, 32);
    const PlanResult a = evaluate(m, c, ring), b = evaluate(m, c, gathered);
    const double kv = double(m.seq / 4) * double(2 * m.kv() * m.head_size() / 8);  // a rank's k and v elements
    const double gather = all_gather_s(4 * kv * 2, 4, c.inter_node),
                 scatter = all_gather_s(4 * kv * 4, 4, c.inter_node);
    CHECK(b.time.cp_comm_hidden_s == 0);
    CHECK(b.time.cp_comm_exposed_s == Approx(4.0 * double(m.layers) * (2 * gather + scatter)).epsilon(1e-9));
    CHECK(a.time.cp_comm_hidden_s > 0);
    CHECK(a.time.cp_comm_exposed_s < b.time.cp_comm_exposed_s);
    CHECK(b.time.step_s > a.time.step_s);
    // The bytes moved: equal in forward, and in backward the ring's one extra fp32 gradient block (its last hop
    // back to the owner) against the reduce-scatter's (cp - 1) of cp.
    const auto busy = [&](const PlanResult& r) { return r.time.link_busy_s[size_t(kLinkInter)]; };
    CHECK(busy(b) < busy(a));
    // The all-gather holds every rank's keys and values (cp blocks) and cp fp32 gradient shares in backward.
    const auto comm = [](const PlanResult& r) { return r.memory.bytes[size_t(MemCategory::comm_buffers)]; };
    CHECK(comm(b) - comm(a) == int64_t(kv * (4 * 2 + 4 * 4)) - int64_t(kv * (2 * 2 + 16)));
}

TEST_CASE("planner: at pp 1 the schedule asked for is the one that runs", "[planner]") {
    // The engine makes the schedule at pp 1 too (engine/train/trainer.cpp): afab runs every forward, then every
    // backward, holding all the micro-batches' activations; 1f1b and zb1 hold one. Time: the same work in the
    // order the engine runs it.
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("llama3-8b");
    Layout one = layout(2, 4, 1, 1, 8), afab = one, zb = one;
    afab.parallel.pp_schedule = PipelineSchedule::afab, zb.parallel.pp_schedule = PipelineSchedule::zb1;
    const PlanResult a = evaluate(m, c, one), b = evaluate(m, c, afab), z = evaluate(m, c, zb);
    const auto acts = [](const PlanResult& r) { return r.memory.bytes[size_t(MemCategory::activations)]; };
    CHECK(b.memory.micro_batches_in_flight == 8);
    CHECK(a.memory.micro_batches_in_flight == 1);
    CHECK(z.memory.micro_batches_in_flight == 1);
    CHECK(acts(b) > 7 * acts(a));
    CHECK(acts(z) == acts(a));
    CHECK(b.time.step_s == Approx(a.time.step_s));
    CHECK(z.time.step_s == Approx(a.time.step_s));
    // The simulated order: afab's eight forwards come first.
    const StepModel sm = model_step(m, c, afab);
    REQUIRE(sm.pipeline.actions.size() == 16);
    for (int i = 0; i < 8; ++i) CHECK(sm.pipeline.actions[size_t(i)].action.op == PipeOp::forward);
    CHECK(sm.pipeline.actions[8].action.op == PipeOp::backward);
}

TEST_CASE("planner: a router's load on the busiest expert rank slows the MoE step", "[planner]") {
    const ClusterDesc c = load_cluster("h100-sxm");
    const ModelDesc m = load_model("mixtral-8x7b");
    Layout uniform = layout(8, 1, 1, 1, 4);
    uniform.parallel.ep = 8;
    Layout loaded = uniform;
    loaded.moe_load = 1.5;
    const PlanResult u = evaluate(m, c, uniform), l = evaluate(m, c, loaded);
    // The bytes scale with the load, the latency terms do not.
    CHECK(l.time.ep_comm_s > 1.4 * u.time.ep_comm_s);
    CHECK(l.time.ep_comm_s <= 1.5 * u.time.ep_comm_s);
    CHECK(l.time.gemm_s > u.time.gemm_s);
    CHECK(l.time.step_s > u.time.step_s);
    const nlohmann::json j = plan_json(m, c, u), k = plan_json(m, c, l);
    CHECK(j["moe_load_kind"] == "assumed uniform");
    CHECK(k["moe_load"].get<double>() == 1.5);
    // The command line refuses a load under 1 (the busiest rank carries at least the uniform share).
    const auto bad =
        us::test::run_process(us::test::bin("ultrascope") + " plan --model mixtral-8x7b --dp 8 --ep 8 --moe-load 0.5");
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("--moe-load") != std::string::npos);
}

TEST_CASE("planner: ranks placed cyclically on the nodes put tp across them and dp inside, as run --nodes does",
          "[planner][nodes]") {
    ClusterDesc c = load_cluster("h100-sxm");
    c.nodes = 2, c.gpus_per_node = 2;
    c.inter_node = {c.intra_node.bandwidth / 100, c.intra_node.latency * 10};
    // tp 2 x dp 2 on 4 ranks: tp is ranks {0,1}, {2,3} (stride 1); dp is {0,2}, {1,3} (stride 2)
    CHECK(&group_link(c, 1, 2) == &c.intra_node);  // block: ranks 0,1 on node 0
    CHECK(&group_link(c, 2, 2) == &c.inter_node);
    c.placement = "cyclic";  // rank r on node r mod 2
    CHECK(&group_link(c, 1, 2) == &c.inter_node);
    CHECK(&group_link(c, 2, 2) == &c.intra_node);
    CHECK(&group_link(c, 1, 1) == &c.intra_node);  // a group of one crosses nothing
    // the field survives the machine file, and a placement the runs do not know is refused
    CHECK(cluster_from_json(cluster_to_json(c), "t").placement == "cyclic");
    nlohmann::json bad = cluster_to_json(c);
    bad["placement"] = "random";
    CHECK_THROWS_WITH(cluster_from_json(bad, "m.json"), Catch::Contains("'placement' must be block or cyclic"));
    // `ultrascope plan --node-placement cyclic` prices tp 2 on the slow link: a slower step than block
    const std::string machine = write_file("placement-machine.json", cluster_to_json(c).dump());
    auto step_s = [&](const std::string& placement) {
        const auto r = us::test::run_process(us::test::bin("ultrascope") + " plan --cluster " + machine +
                                             " --node-placement " + placement + " --json --tp 2 --dp 2 --preset small");
        INFO(r.output);
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.output)["step_time_s"].get<double>();
    };
    CHECK(step_s("cyclic") > step_s("block"));
}
