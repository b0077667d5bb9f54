// The analysis on synthetic traces whose answers are known by hand: the step breakdown and overlap, pipeline
// bubbles, memory peaks and their phases, throughput and MFU, predictions, and the Chrome export.
#include <zlib.h>

#include <map>

#include "engine/model/activations.h"
#include "common/settings/config.h"
#include "prof_test_util.h"
#include "profiler/analysis/report.h"
#include "profiler/analysis/steady_step.h"
#include "profiler/trace/chrome_export.h"
#include "test_util.h"

using namespace us;
using namespace us::prof;
using namespace us::test;

TEST_CASE("step breakdown: compute, overlapped and exposed communication, idle", "[cpu][analysis]") {
    SyntheticRank r(0);
    r.step(0, 100, 1);
    r.op(0, 60);
    r.op(70, 90);
    r.comm(50, 80);                                            // overlaps [50,60] and [70,80] with compute: 20 of 30 ms
    r.span(Lane::compute, SpanKind::layer, 0, 90, "block 0");  // containers are not compute
    TraceStore store;
    load(store, r, metadata(0, 1, 0, 0, 1));
    const auto steps = analyze_steps(store, 0);
    REQUIRE(steps.size() == 1);
    const auto& s = steps[0];
    CHECK(s.wall_s == Approx(0.100));
    CHECK(s.compute_s == Approx(0.080));
    CHECK(s.comm_s == Approx(0.030));
    CHECK(s.overlapped_s == Approx(0.020));
    CHECK(s.exposed_s == Approx(0.010));
    CHECK(s.idle_s == Approx(0.010));  // 100 - |C u M| = 100 - 90
    CHECK(s.overlap_pct == Approx(100.0 * 20 / 30));
    // [60,70] lies between the first and last op but inside the exposed collective: communication, not bubble
    CHECK(s.bubble_s == Approx(0.0).margin(1e-12));
}

TEST_CASE("on a GPU traced by CUPTI the device lanes are C and M, the engine's launches and waits are not",
          "[cpu][analysis]") {
    SyntheticRank gpu(0, 2), cpu(1, 2);
    gpu.step(0, 100, 1);
    // the engine's side: op launches on the host lane (with the FLOPs) and a collective from launch to completion
    gpu.span(Lane::host, SpanKind::op, 0, 4, "gemm", 1, OpClass::gemm, 1000);
    gpu.span(Lane::host, SpanKind::op, 90, 100, "gemm", 1, OpClass::gemm, 500);
    gpu.comm(50, 99);
    // the GPU's side: kernels and a memcpy on two streams, a NCCL all-reduce, a pipeline send
    gpu.kernel(5, 40, 0);
    gpu.kernel(45, 60, 0);
    gpu.kernel(60, 65, 1, "memcpy HtoD");
    gpu.nccl(55, 80);
    gpu.nccl(85, 95, OpClass::send);
    gpu.last_span().peer = 1;  // to a named peer: a pipeline transfer
    // a rank of the same run without device spans keeps the engine's spans as its truth
    cpu.step(0, 100, 1);
    cpu.op(0, 60);
    cpu.comm(50, 80);
    TraceStore store;
    load(store, gpu, metadata(0, 2, 0, 0, 1));
    load(store, cpu, metadata(1, 2, 1, 0, 1));
    REQUIRE(store.rank(0)->has_device_spans());
    CHECK(store.rank(0)->work_lane() == Lane::device);
    CHECK_FALSE(store.rank(1)->has_device_spans());
    const auto g = analyze_steps(store, 0);
    REQUIRE(g.size() == 1);
    CHECK(g[0].device_truth);
    CHECK(g[0].compute_s == Approx(0.055));     // [5,40] u [45,65]
    CHECK(g[0].comm_s == Approx(0.025));        // the all-reduce kernel [55,80], not the engine's [50,99]
    CHECK(g[0].overlapped_s == Approx(0.010));  // [55,65]
    CHECK(g[0].exposed_s == Approx(0.015));
    CHECK(g[0].idle_s == Approx(0.030));    // 100 - |[5,40] u [45,80]|
    CHECK(g[0].p2p_s == Approx(0.010));     // the send kernel: a pipeline transfer, not M
    CHECK(g[0].bubble_s == Approx(0.005));  // [40,45] between the first and the last kernel
    CHECK(g[0].first_op == 5'000'000);
    // A send kernel whose peer nothing names (ncclKernel_SendRecv of a sampled trace, NCCL's grouped all-to-all):
    // communication of its group, in M like the all-reduce, not a pipeline transfer.
    SyntheticRank peerless(0, 1);
    peerless.step(0, 100, 1);
    peerless.kernel(5, 40, 0);
    peerless.nccl(30, 60, OpClass::send);
    TraceStore unnamed;
    load(unnamed, peerless, metadata(0, 1, 0, 0, 1));
    const auto u = analyze_steps(unnamed, 0);
    REQUIRE(u.size() == 1);
    CHECK(u[0].comm_s == Approx(0.030));
    CHECK(u[0].overlapped_s == Approx(0.010));  // [30,40]
    CHECK(u[0].p2p_s == 0.0);
    CHECK(g[0].last_op == 65'000'000);
    CHECK(g[0].flops == 1500);  // from the engine's op spans
    const auto c = analyze_steps(store, 1);
    REQUIRE(c.size() == 1);
    CHECK_FALSE(c[0].device_truth);
    CHECK(c[0].compute_s == Approx(0.060));
    CHECK(c[0].comm_s == Approx(0.030));
    const auto j = report_json(build_report(store));
    CHECK(j["ranks"][0]["time_source"] == "device");
    CHECK(j["ranks"][1]["time_source"] == "engine");
}

TEST_CASE("device memory reserved (CUPTI) in the report, a GPU rank without kernel spans is flagged",
          "[cpu][analysis]") {
    SyntheticRank traced(0, 2), untraced(1, 2);
    traced.step(0, 10, 1);
    traced.kernel(1, 5);
    traced.counter(2, "device_reserved_bytes", 4096);
    traced.counter(3, "device_reserved_bytes", 1 << 20);
    traced.counter(4, "device_reserved_bytes", 2048);
    untraced.step(0, 10, 1);
    untraced.span(Lane::host, SpanKind::op, 1, 5, "gemm", 1, OpClass::gemm);
    auto meta = [](int rank) {
        auto m = nlohmann::json::parse(metadata(rank, 2, rank, 0, 1));
        m["backend"] = "cuda";
        return m;
    };
    auto m1 = meta(1);
    m1["cupti"] = {{"running", false}, {"status", "CUPTI: enabling kernel activity failed (another CUPTI client)"}};
    auto m0 = meta(0);
    m0["cupti"] = {{"running", true},      {"status", "CUPTI: collecting"},
                   {"kernels", 120},       {"nccl_kernels", 4},
                   {"memcpys", 3},         {"memsets", 2},
                   {"attributed", 118},    {"unattributed", 2},
                   {"dropped_records", 0}, {"overhead_ms", 1.5}};
    TraceStore store;
    load(store, traced, m0.dump());
    load(store, untraced, m1.dump());
    const Report rep = build_report(store);
    REQUIRE(rep.ranks.size() == 2);
    CHECK(rep.ranks[0].device_reserved_peak == (1 << 20));
    CHECK(rep.ranks[1].device_reserved_peak == -1);
    const auto j = report_json(rep);
    CHECK(j["ranks"][0]["device_reserved_peak_bytes"] == (1 << 20));
    CHECK(j["ranks"][1]["device_reserved_peak_bytes"].is_null());
    REQUIRE(rep.warnings.size() == 1);
    CHECK(rep.warnings[0].find("rank 1 ran on a GPU without kernel-level spans") != std::string::npos);
    CHECK(rep.warnings[0].find("another CUPTI client") != std::string::npos);
    const std::string text = format_report(rep);
    CHECK(text.find("device reserved") != std::string::npos);
    CHECK(text.find("compute of rank(s) 0 is the GPU's kernels") != std::string::npos);
    CHECK(text.find("CUPTI recorded 120 kernels (4 NCCL), 3 memcpys, 2 memsets; 118 attributed to an op, 2 not; 0 "
                    "records dropped") != std::string::npos);
    CHECK(j["ranks"][0]["cupti"]["attributed"] == 118);
    CHECK(j["ranks"][1]["cupti"]["running"] == false);
}

TEST_CASE("on a GPU whose ranks talk through MPI with host staging the engine's collectives are M", "[cpu][analysis]") {
    // No NCCL kernels (ranks share a GPU, or pipeline transfers): the kernels are C, the engine's spans M.
    SyntheticRank gpu(0, 2);
    gpu.step(0, 100, 1);
    gpu.span(Lane::host, SpanKind::op, 0, 4, "gemm", 1, OpClass::gemm, 1000);
    gpu.kernel(5, 40, 0);
    gpu.comm(30, 70);
    gpu.span(Lane::p2p, SpanKind::comm, 80, 90, "send", 1, OpClass::send);
    TraceStore store;
    load(store, gpu, metadata(0, 2, 0, 0, 1));
    const auto g = analyze_steps(store, 0);
    REQUIRE(g.size() == 1);
    CHECK(g[0].device_truth);
    CHECK(g[0].compute_s == Approx(0.035));     // the kernel [5,40]
    CHECK(g[0].comm_s == Approx(0.040));        // the engine's all-reduce [30,70]
    CHECK(g[0].overlapped_s == Approx(0.010));  // [30,40]
    CHECK(g[0].exposed_s == Approx(0.030));
    CHECK(g[0].p2p_s == Approx(0.010));  // the engine's send
    CHECK(g[0].idle_s == Approx(0.100 - 0.065));
}

TEST_CASE("steady steps leave step 1 out, sums recompute the percentages", "[cpu][analysis]") {
    SyntheticRank r(0);
    r.step(0, 100, 1);
    r.op(0, 100, 1);
    for (int k = 0; k < 3; ++k) {
        const double b = 100 + 50 * k;
        r.step(b, b + 50, k + 2);
        r.op(b, b + 40, k + 2);
        r.comm(b + 30, b + 50, k + 2);  // 10 of 20 ms overlapped
    }
    TraceStore store;
    load(store, r, metadata(0, 1, 0, 0, 1));
    const auto steps = analyze_steps(store, 0);
    REQUIRE(steps.size() == 4);
    const auto steady = steady_steps(steps);
    REQUIRE(steady.size() == 3);
    CHECK(steady.front().step == 2);
    const auto sum = sum_steps(steady);
    CHECK(sum.wall_s == Approx(0.150));
    CHECK(sum.overlap_pct == Approx(50.0));
    CHECK(sum.exposed_s == Approx(0.030));
}

TEST_CASE("pipeline bubble of a stage: idle between its first and last op over its op time", "[cpu][analysis]") {
    // pp 2, m 2 with forward = backward = 10 ms: stage 1's ops run [10,20] F0, [20,30] F1?... build a GPipe pair.
    SyntheticRank s0(0, 2), s1(1, 2);
    s0.step(0, 80, 1);
    s1.step(0, 80, 1);
    // stage 0: F0 [0,10] F1 [10,20] ... B0 [50,60] B1 [60,70]  -> idle [20,50] = 30 ms within [0,70]
    s0.op(0, 10), s0.op(10, 20), s0.op(50, 60), s0.op(60, 70);
    // stage 1: F0 [10,20] F1 [20,30] B0 [30,40] B1 [40,50]      -> no idle between first and last op
    s1.op(10, 20), s1.op(20, 30), s1.op(30, 40), s1.op(40, 50);
    TraceStore store;
    load(store, s0, metadata(0, 2, 0, 0, 2, 2));
    load(store, s1, metadata(1, 2, 0, 1, 2, 2));
    const auto a = analyze_steps(store, 0), b = analyze_steps(store, 1);
    CHECK(a[0].bubble_s == Approx(0.030));
    CHECK(a[0].bubble_fraction == Approx(30.0 / 40.0));
    CHECK(b[0].bubble_fraction == Approx(0.0));
    const Report rep = build_report(store);
    REQUIRE(rep.ranks.size() == 2);
    CHECK(rep.ranks[0].predicted.bubble_theory == Approx(0.5));  // (pp - 1) / m = 1 / 2
    // over the pipeline's window [0, 70]: stage 1 waits 10 ms for the warm-up and 20 ms for the cool-down
    CHECK(rep.ranks[1].steady.bubble_fraction == Approx(30.0 / 40.0));
    CHECK(rep.ranks[0].steady.bubble_fraction == Approx(30.0 / 40.0));
    CHECK(rep.ranks[1].steady.stage_bubble_fraction == Approx(0.0));
    CHECK(rep.ranks[0].label == "rank 0 (dp 0, pp 0)");
    CHECK(rep.ranks[1].label == "rank 1 (dp 0, pp 1)");
}

TEST_CASE("memory peaks per category, the phase they fall in, and step 1 against later steps", "[cpu][analysis]") {
    SyntheticRank r(0);
    using C = MemCategory;
    r.memory(0, C::params, 100, 100, Phase::none, 0);
    r.memory(1, C::activations, 50, 150, Phase::forward, 1);
    r.memory(2, C::grads, 100, 250, Phase::backward, 1);
    r.memory(3, C::activations, 0, 200, Phase::backward, 1);
    r.memory(4, C::optimizer_state, 200, 400, Phase::optimizer, 1);  // step 1 allocates the moments
    r.memory(5, C::activations, 80, 480, Phase::forward, 2);
    r.memory(6, C::activations, 0, 400, Phase::backward, 2);
    TraceStore store;
    load(store, r, metadata(0, 1, 0, 0, 1));
    const MemoryPeaks m = analyze_memory(*store.rank(0));
    CHECK(m.peak[size_t(C::activations)] == 80);
    CHECK(m.peak_phase[size_t(C::activations)] == Phase::forward);
    CHECK(m.peak_phase[size_t(C::optimizer_state)] == Phase::optimizer);
    CHECK(m.total_peak == 480);
    CHECK(m.total_peak_phase == Phase::forward);
    CHECK(m.step1_peak[size_t(C::activations)] == 50);
    CHECK(m.steady_peak[size_t(C::activations)] == 80);
    CHECK(m.step1_total_peak == 400);
    CHECK(m.has_steady);
    const auto timeline = memory_timeline(*store.rank(0));
    REQUIRE(timeline.size() == 7);
    CHECK(timeline[4].bytes[size_t(C::grads)] == 100);
}

TEST_CASE("throughput and MFU from step times, the model's FLOPs per token, and the measured peak", "[cpu][analysis]") {
    SyntheticRank r(0);
    r.step(0, 200, 1);
    r.step(200, 300, 2);  // steady steps of 100 ms
    r.step(300, 400, 3);
    TraceStore store;
    load(store, r, metadata(0, 1, 0, 0, 1, 1, /*peak GFLOP/s*/ 10));
    const Report rep = build_report(store);
    const auto& t = rep.throughput;
    CHECK(t.steps_measured == 2);
    CHECK(t.step_s == Approx(0.1));
    const double tokens = 4 * 32;  // batch x seq
    CHECK(t.tokens_per_s == Approx(tokens / 0.1));
    const double n = 64.0 * 256 + 4 * (12.0 * 64 * 64 + 13 * 64) + 2 * 64;
    CHECK(t.model_flops_per_token == Approx(6 * n + 12.0 * 4 * 64 * 32));
    CHECK(t.mfu == Approx(t.tokens_per_s * t.model_flops_per_token / 10e9));
    const auto j = report_json(rep);
    for (const char* key : {"rank", "coords", "memory_peak_bytes", "memory_predicted_bytes", "compute_s",
                            "comm_overlapped_s", "comm_exposed_s", "idle_s", "overlap_pct", "bubble_fraction",
                            "bubble_fraction_formula", "bubble_fraction_predicted", "device_peak_source"})
        CHECK(j["ranks"][0].contains(key));
    CHECK(j["throughput"].contains("tokens_per_s"));
    for (const char* key :
         {"mfu_derived", "model_flops_per_token_formula", "achieved_flops_per_s_derived", "peak_source"})
        CHECK(j["throughput"].contains(key));
}

TEST_CASE("predicted activations equal the engine's own per-layer table", "[cpu][analysis][memory]") {
    for (auto [B, T, C, NH] :
         std::vector<std::tuple<int, int, int, int>>{{2, 16, 32, 4}, {8, 128, 256, 4}, {1, 1024, 768, 12}})
        for (const char* mode : {"none", "selective", "full"})
            for (bool bf16 : {false, true})
                for (auto [tp, sp] : std::vector<std::pair<int, bool>>{{1, false}, {2, false}, {2, true}, {4, true}}) {
                    predict::PredictInput in;
                    in.micro_batch = B, in.seq = T, in.hidden = C, in.heads = NH, in.layers = 3, in.vocab = 256;
                    in.recompute = parse_recompute(mode);
                    in.bf16 = bf16;
                    in.parallel.tp = tp, in.parallel.sp = sp;
                    ActivationShape s;
                    s.B = B, s.T = T, s.C = C, s.NH = NH, s.V = (256 + tp - 1) / tp,
                    s.dtype = bf16 ? DType::bf16 : DType::f32;
                    s.tp = tp, s.sp = sp;
                    const Recompute r = parse_recompute(mode);
                    INFO(mode << (bf16 ? " bf16" : " fp32") << " B " << B << " T " << T << " tp " << tp << " sp "
                              << sp);
                    const predict::Prediction p = predict::predict(in);
                    CHECK(p.activations_per_layer == block_saved_bytes(s, r));
                    const int64_t base = 2 * s.N() * 4 + embedding_saved_bytes(s) + 3 * block_saved_bytes(s, r);
                    const int64_t expected = r == Recompute::full
                                                 ? base + std::max(block_working_bytes(s, r), head_saved_bytes(s))
                                                 : base + head_saved_bytes(s);
                    CHECK(*p.memory[size_t(MemCategory::activations)] == expected);
                    CHECK(*p.memory[size_t(MemCategory::temporaries)] == backward_temporaries_bytes(s, true));
                }
}

TEST_CASE("Chrome export: a process per rank, a thread per lane, spans with args, memory counters",
          "[cpu][analysis][export]") {
    SyntheticRank r0(0, 2), r1(1, 2);
    r0.step(0, 10, 1);
    r0.op(1, 5, 1, 1000);
    r0.memory(2, MemCategory::activations, 64, 64, Phase::forward);
    r1.step(0, 10, 1);
    r1.comm(2, 8);
    TraceStore store;
    load(store, r0, metadata(0, 2, 0, 0, 1));
    load(store, r1, metadata(1, 2, 1, 0, 1));
    const std::string out = temp_path("export.json");
    export_chrome_trace(store, out);
    const auto j = nlohmann::json::parse(read_file(out));
    CHECK(j["distributedInfo"]["world_size"] == 2);
    int processes = 0, x = 0, c = 0;
    bool named_rank1 = false, op_args = false;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "process_name") {
            ++processes;
            named_rank1 |= e["args"]["name"] == "rank 1 (dp 1, pp 0)";
        }
        if (e["ph"] == "X") {
            ++x;
            if (e["name"] == "gemm") op_args = e["args"]["flops"] == 1000 && e["args"]["step"] == 1 && e["tid"] == 1;
        }
        if (e["ph"] == "C") ++c;
    }
    CHECK(processes == 2);
    CHECK(named_rank1);
    CHECK(x == 4);
    CHECK(op_args);
    CHECK(c == 1);
    // .gz output is gzip
    const std::string gz = temp_path("export.json.gz");
    export_chrome_trace(store, gz);
    gzFile f = gzopen(gz.c_str(), "rb");
    char head[32] = {};
    gzread(f, head, sizeof head - 1);
    gzclose(f);
    CHECK(std::string(head).find("displayTimeUnit") != std::string::npos);
}

TEST_CASE("Chrome export: a thread per GPU stream on the device lanes, named after CUPTI's stream ids",
          "[cpu][analysis][export]") {
    SyntheticRank r(0);
    r.step(0, 10, 1);
    r.kernel(1, 2, 0);
    r.kernel(2, 3, 0);
    r.kernel(1, 3, 1, "memcpy DtoD");
    r.nccl(2, 6, OpClass::all_reduce, 2);
    auto meta = nlohmann::json::parse(metadata(0, 1, 0, 0, 1));
    meta["cupti"] = {{"streams", {{1, 7}, {1, 13}, {1, 14}}}};
    TraceStore store;
    load(store, r, meta.dump());
    const std::string out = temp_path("export-device.json");
    export_chrome_trace(store, out);
    const auto j = nlohmann::json::parse(read_file(out));
    std::map<int, std::string> thread_names;
    std::map<int, int> spans_per_thread;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"].get<int>()] = e["args"]["name"];
        if (e["ph"] == "X") ++spans_per_thread[e["tid"].get<int>()];
    }
    CHECK(thread_names[400] == "device (stream 7)");
    CHECK(thread_names[401] == "device (stream 13)");
    CHECK(thread_names[502] == "device_comm (stream 14)");
    CHECK(spans_per_thread[400] == 2);
    CHECK(spans_per_thread[401] == 1);
    CHECK(spans_per_thread[502] == 1);
    CHECK(thread_names.count(4) == 0);  // no row for an empty lane
}

TEST_CASE("the tp activation prediction has the textbook's shape: tp divides the attention and MLP part, sp all of it",
          "[cpu][analysis][memory][tp]") {
    // The engine keeps no dropout masks and fuses nothing away, so its constants differ from Korthikanti et al.'s
    // (docs/memory.md); the structure must not: per layer, sbh(a + b/tp) without SP and (sbh/tp)(a + b) with it.
    predict::PredictInput in;
    in.micro_batch = 4, in.seq = 64, in.hidden = 128, in.heads = 8, in.layers = 2, in.recompute = Recompute::selective;
    const int64_t N = 4 * 64, h = 128, e = 4;
    auto per_layer = [&](int tp, bool sp) {
        in.parallel.tp = tp, in.parallel.sp = sp;
        return predict::predict(in).activations_per_layer;
    };
    // selective, fp32: stats 16R plus e*(4R*h + 12N*h/tp) -> no SP: (4 + 12/tp) sbh e + 16N
    CHECK(per_layer(1, false) == e * 16 * N * h + 16 * N);
    CHECK(per_layer(2, false) == e * (4 + 6) * N * h + 16 * N);
    CHECK(per_layer(4, false) == e * (4 + 3) * N * h + 16 * N);
    CHECK(per_layer(4, true) == (e * 16 * N * h + 16 * N) / 4);
    // The textbook figure beside it, for the same settings (bf16 with dropout masks, doubled for fp32).
    in.parallel.tp = 4, in.parallel.sp = false;
    CHECK(predict::predict(in).activations_per_layer_formula == int64_t(2.0 * double(N * h) * (10 + 24.0 / 4)));
    in.parallel.sp = true;
    CHECK(predict::predict(in).activations_per_layer_formula == int64_t(2.0 * double(N * h) / 4 * 34));
}

TEST_CASE("parameters per rank under tensor parallelism follow N_tp, the vocabulary padded", "[cpu][analysis][tp]") {
    predict::PredictInput in;
    in.hidden = 96, in.heads = 3, in.layers = 4, in.vocab = 256;
    const int64_t h = 96, L = 4;
    for (int tp : {1, 2, 3}) {
        in.parallel.tp = tp;
        const int64_t vocab_rows = (256 + tp - 1) / tp;  // 256, 128, 86 (two rows of padding at tp 3)
        INFO("tp " << tp);
        CHECK(predict::predict(in).params_on_rank ==
              h * vocab_rows + L * (12 * h * h / tp + 7 * h / tp + 6 * h) + 2 * h);
    }
    CHECK(predict::predict(in).params == h * 256 + L * (12 * h * h + 13 * h) + 2 * h);  // the model's N does not change
}

TEST_CASE("the trace store's memory cap: past it op spans and memory events are counted, not kept, steps stay whole",
          "[cpu][profiler][cap]") {
    const std::string trace = us::test::temp_path("cap.ustrace");
    const us::test::ProcessResult made =
        us::test::run_process(us::test::bin("ultrascope-train") + " --preset tiny --steps 20 --quiet --trace " + trace +
                              " --data " + us::test::sample_data_file("cap-data.txt", 20000));
    REQUIRE(made.exit_code == 0);
    us::prof::TraceStore whole;
    us::prof::load_trace(trace, whole);
    REQUIRE_FALSE(whole.at_cap());
    REQUIRE(whole.bytes_used() > 50000);
    us::prof::TraceStore capped(us::prof::TraceStoreOptions{whole.bytes_used() / 3});
    us::prof::load_trace(trace, capped);
    CHECK(capped.at_cap());
    // past the cap only steps, phases, layers, communication and counters are added
    CHECK(capped.bytes_used() < whole.bytes_used() * 6 / 10);
    CHECK(capped.spans_dropped_by_cap() > 0);
    CHECK(capped.memory_events_dropped_by_cap() > 0);
    CHECK(capped.cap_reached_at_step() > 1);
    CHECK(capped.cap_reached_at_step() < 20);
    // every step is still there, and the loss counter too
    CHECK(us::prof::analyze_steps(capped, 0).size() == 20);
    CHECK(capped.latest_counter("loss").has_value());
    const us::prof::Report rep = us::prof::build_report(capped);
    bool warned = false;
    for (const auto& w : rep.warnings) warned |= w.find("reached its cap") != std::string::npos;
    CHECK(warned);
    const auto bad = us::test::run_process(us::test::bin("ultrascope") + " report " + trace + " --store-cap-mib 0");
    CHECK(bad.exit_code != 0);
}

TEST_CASE("lane rows built batch by batch, as a live run delivers them, equal rows built at once", "[cpu][profiler]") {
    // Nested and overlapping spans; parents arrive after their children (they are recorded when they end), and
    // batches overlap in time, as chunks from a live rank do.
    us::Rng rng(7);
    std::vector<us::prof::Span> spans;
    int64_t t = 0;
    for (int step = 0; step < 300; ++step) {
        const int64_t step_begin = t;
        for (int op = 0; op < 6; ++op) {
            us::prof::Span s;
            s.begin = t + int64_t(rng.next_below(50));
            s.end = s.begin + 10 + int64_t(rng.next_below(400));
            s.name = uint32_t(op);
            spans.push_back(s);
            t += 100 + int64_t(rng.next_below(200));
        }
        us::prof::Span parent;
        parent.begin = step_begin;
        parent.end = t + 60;
        parent.name = 99;
        spans.push_back(parent);  // after its children
    }
    us::prof::LaneTrack whole, live;
    for (const auto& s : spans) whole.append(s);
    whole.finalize();
    for (size_t i = 0; i < spans.size();) {
        const size_t batch = 1 + rng.next_below(40);
        for (size_t k = 0; k < batch && i < spans.size(); ++k, ++i) live.append(spans[i]);
        live.finalize();
    }
    REQUIRE(live.spans().size() == whole.spans().size());
    REQUIRE(live.rows() == whole.rows());
    CHECK(whole.rows() >= 2);
    for (size_t i = 0; i < whole.spans().size(); ++i) {
        INFO("span " << i);
        REQUIRE(live.spans()[i].begin == whole.spans()[i].begin);
        REQUIRE(live.spans()[i].row == whole.spans()[i].row);
    }
    for (int r = 0; r < whole.rows(); ++r) CHECK(live.row(r) == whole.row(r));
}

TEST_CASE("the memory walk takes a rank's measured expert load under ep, and only the experts' side",
          "[analysis][memory][moe]") {
    predict::PredictInput in;
    in.moe_experts = 4, in.moe_topk = 2, in.parallel.dp = 2,
    in.parallel.ep = 2;  // the small model: h 256, 4 layers, seq 128, batch 8
    const predict::Prediction uniform = predict::predict(in);
    in.moe_expert_load = {1.5, 1.0, 1.0, 1.0};  // layer 0's experts on this rank got half as many rows again
    const predict::Prediction loaded = predict::predict(in);
    const int64_t X = 8 * 128 * 2, extra = X / 2, C = 256, F = 4 * 256;
    // the experts' inputs, hidden and GeLU outputs (fp32) and the exchange's row order; the token side unchanged
    CHECK(*loaded.memory[size_t(MemCategory::activations)] - *uniform.memory[size_t(MemCategory::activations)] ==
          4 * extra * (C + 2 * F) + 8 * extra);
    // a load of 1 everywhere, or no ep (every choice stays on the rank), changes nothing
    in.moe_expert_load = {1.0, 1.0, 1.0, 1.0};
    CHECK(predict::predict(in).memory == uniform.memory);
    in.moe_expert_load = {1.5, 1.0, 1.0, 1.0};
    in.parallel.ep = 1;
    predict::PredictInput no_ep = in;
    no_ep.moe_expert_load.clear();
    CHECK(predict::predict(in).memory == predict::predict(no_ep).memory);
}

TEST_CASE("at long sequences the report says that MFU counts attention's whole square, and names the kernel",
          "[cpu][analysis]") {
    for (int seq : {32, 1024}) {
        INFO("seq " << seq);
        SyntheticRank r(0);
        for (int step = 1; step <= 3; ++step) {
            r.step(100.0 * step, 100.0 * step + 90, step);
            r.op(100.0 * step, 100.0 * step + 80, step, 1000000);
        }
        auto meta = nlohmann::json::parse(metadata(0, 1, 0, 0, 1));
        meta["config"]["seq"] = seq;  // h 64, L 4: 12*L*h*s is 7% of the FLOPs at 32, 71% at 1024
        meta["config"]["attention"] = seq == 1024 ? "flash" : "naive";
        TraceStore store;
        load(store, r, meta.dump());
        const std::string text = format_report(build_report(store));
        const bool said = text.find("it counts the whole s x s square") != std::string::npos;
        CHECK(said == (seq == 1024));
        // the run line names the attention kernel
        CHECK(text.find(seq == 1024 ? "ZeRO-0; attention flash\n" : "ZeRO-0; attention naive\n") != std::string::npos);
    }
}

TEST_CASE("steady steps: step 1 is left out of a run that starts there, a later start keeps all, and says so",
          "[cpu][analysis]") {
    CHECK(us::prof::first_steady_index(1, 5) == 1);
    CHECK(us::prof::first_steady_index(1, 1) == 0);  // one step: it is all there is
    CHECK(us::prof::first_steady_index(3, 3) == 0);  // PyTorch's profiler, after its warm-up
    CHECK(us::prof::steady_steps_said(1, 5) == "step 1 left out");
    CHECK(us::prof::steady_steps_said(3, 3) == "all 3 steps (the trace starts at step 3)");
    CHECK(us::prof::steady_steps_said(1, 1) == "the only step");
}
