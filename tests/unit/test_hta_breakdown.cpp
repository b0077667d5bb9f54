// HTA's analyses (profiler/analysis/hta_breakdown.h) on hand-built device lanes whose every figure is worked out
// below: the temporal breakdown, the computation-communication overlap, the idle breakdown's three categories,
// the last ProfilerStep and what follows it left out, two streams. Plus process groups beyond the engine's kinds
// (kGroupKinds).
#include "profiler/analysis/hta_breakdown.h"
#include "profiler/analysis/report.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us::prof;
using us::test::SyntheticRank;

namespace {

// Times in ms. Steps 1..3 are ProfilerStep#0..#2; #2 is the last one, which HTA leaves out.
//   host ops (launches): act @0.5 and gemm @5.5 in step 1, gemm @10.5 and act @11 in step 2
//   stream 0: A [1,3) B [3.01,5) C [6,7) (gemm) | D [12,14) E [15,16) (gemm) | F [21,22) step 3 | G [25,26) step 0
//   stream 1: an all-reduce NCCL kernel N [2,4) in step 1, a memcpy M [13,13.5) in step 2 (launched by the act @11)
SyntheticRank two_streams() {
    SyntheticRank r(0);
    r.step(0, 10, 1), r.step(10, 20, 2), r.step(20, 30, 3);
    r.span(Lane::host, SpanKind::op, 0.5, 0.6, "gelu", 1, OpClass::activation);
    r.span(Lane::host, SpanKind::op, 5.5, 5.6, "c_fc", 1, OpClass::gemm);
    r.span(Lane::host, SpanKind::op, 10.5, 10.6, "c_fc", 2, OpClass::gemm);
    r.span(Lane::host, SpanKind::op, 11, 11.1, "gelu", 2, OpClass::activation);
    r.kernel(1, 3, 0, "gelu_kernel", 1);
    r.kernel(3.01, 5, 0, "gelu_kernel", 1);
    r.span(Lane::device, SpanKind::op, 6, 7, "sm90_gemm", 1, OpClass::gemm);
    r.kernel(12, 14, 0, "gelu_kernel", 2);
    r.span(Lane::device, SpanKind::op, 15, 16, "sm90_gemm", 2, OpClass::gemm);
    r.kernel(21, 22, 0, "gelu_kernel", 3);
    r.kernel(25, 26, 0, "gelu_kernel", 0);
    r.nccl(2, 4, OpClass::all_reduce, 1, 1);
    r.kernel(13, 13.5, 1, "memcpy HtoD", 2);
    return r;
}

TraceStore store_of(const SyntheticRank& r, const std::string& meta = R"({"rank": 0, "world_size": 1})") {
    TraceStore store;
    us::test::load(store, r, meta);
    return store;
}

}  // namespace

TEST_CASE("HTA's kernel types come from the name", "[cpu][hta]") {
    CHECK(hta_kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Lane::device) ==
          HtaKernelType::communication);
    CHECK(hta_kernel_type("ncclKernel_SendRecv", Lane::device) == HtaKernelType::communication);
    CHECK(hta_kernel_type("anything", Lane::device_comm) == HtaKernelType::communication);
    CHECK(hta_kernel_type("Memcpy DtoH (Device -> Pinned)", Lane::device) == HtaKernelType::memory);
    CHECK(hta_kernel_type("Memset (Device)", Lane::device) == HtaKernelType::memory);
    CHECK(hta_kernel_type("memcpy HtoD", Lane::device) == HtaKernelType::memory);
    CHECK(hta_kernel_type("memset", Lane::device) == HtaKernelType::memory);
    CHECK(hta_kernel_type("cudaStreamSync_kernel", Lane::device) == HtaKernelType::other);
    CHECK(hta_kernel_type("copy_with_Memcpy", Lane::device) == HtaKernelType::other);
    CHECK(hta_kernel_type("ampere_sgemm_128x64_tn", Lane::device) == HtaKernelType::computation);
    CHECK(hta_kernel_type("nccl_but_not_a_kern", Lane::device) == HtaKernelType::computation);
}

TEST_CASE("HTA temporal breakdown, overlap and idle breakdown on two streams, by hand", "[cpu][hta]") {
    const TraceStore store = store_of(two_streams());
    const auto b = hta_breakdown(store, 0);
    REQUIRE(b.has_value());
    CHECK(b->kineto_steps == std::vector<int>{0, 1});  // #2 is the last ProfilerStep: left out, with F and G
    CHECK(b->launch_source.find("inferred") != std::string::npos);
    const HtaFigures& f = b->total;
    CHECK(f.kernels == 7);
    // merged: [1,5) (A, N, B) [6,7) [12,14) (D holds M) [15,16): 8 ms busy over 15 ms
    CHECK(f.kernel_time_us == Approx(15000));
    CHECK(f.idle_time_us == Approx(7000));
    // computation: A B C D E = 2 + 1.99 + 1 + 2 + 1 ms; the 10 us between A and B only N covers
    CHECK(f.compute_time_us == Approx(7990));
    CHECK(f.non_compute_time_us == Approx(10));
    REQUIRE(f.comp_comm_overlap_pct.has_value());
    CHECK(*f.comp_comm_overlap_pct == Approx(99.5));  // N [2,4) under A and B but for [3, 3.01)
    // stream 0: B 10 us after A (launched before A ended: kernel wait), C 1 ms after B (launched at 5.5 after B
    // ended at 5: host wait), D 5 ms after C (launched at 11: host wait), E 1 ms after D (launched at 11, before D
    // ended: other); stream 1: M 9 ms after N (launched at 11: host wait)
    REQUIRE(f.host_wait_us.has_value());
    CHECK(*f.host_wait_us == Approx(1000 + 5000 + 9000));
    CHECK(*f.kernel_wait_us == Approx(10));
    CHECK(*f.other_us == Approx(1000));

    REQUIRE(b->per_step.size() == 2);
    const HtaFigures& s0 = b->per_step[0].figures;
    CHECK(b->per_step[0].kineto_step == 0);
    CHECK(s0.kernel_time_us == Approx(6000));
    CHECK(s0.idle_time_us == Approx(1000));
    CHECK(s0.compute_time_us == Approx(4990));
    CHECK(s0.non_compute_time_us == Approx(10));
    CHECK(*s0.comp_comm_overlap_pct == Approx(99.5));
    CHECK(*s0.host_wait_us == Approx(1000));
    CHECK(*s0.kernel_wait_us == Approx(10));
    CHECK(*s0.other_us == Approx(0));
    const HtaFigures& s1 = b->per_step[1].figures;
    CHECK(b->per_step[1].kineto_step == 1);
    CHECK(s1.kernel_time_us == Approx(4000));
    CHECK(s1.idle_time_us == Approx(1000));
    CHECK(s1.compute_time_us == Approx(3000));
    CHECK(s1.non_compute_time_us == Approx(0));
    CHECK_FALSE(s1.comp_comm_overlap_pct.has_value());  // no communication kernel in the step: unknown, not 0
    CHECK(*s1.host_wait_us == Approx(0));
    CHECK(*s1.other_us == Approx(1000));

    const nlohmann::json j = hta_json(*b);
    CHECK(j["steps"] == nlohmann::json::array({0, 1}));
    CHECK(j["kernel_time_us"].get<double>() == Approx(15000));
    CHECK(j["idle_breakdown"]["host_wait_us"].get<double>() == Approx(15000));
    CHECK(j.size() == 7);
}

TEST_CASE("HTA keeps every kernel of a trace with one ProfilerStep, and rounds to whole microseconds", "[cpu][hta]") {
    SyntheticRank r(0);
    r.step(0, 10, 1);
    r.kernel(1.0004, 1.0026, 0, "k", 1);  // 1000.4 .. 1002.6 us: HTA reads 1001 .. 1002
    r.kernel(2, 3, 0, "k", 0);            // outside the step: kept all the same
    const TraceStore store = store_of(r);
    const auto b = hta_breakdown(store, 0);
    REQUIRE(b.has_value());
    CHECK(b->kineto_steps == std::vector<int>{0});
    CHECK(b->total.kernels == 2);
    CHECK(b->total.kernel_time_us == Approx(3000 - 1001));
    CHECK(b->total.compute_time_us == Approx(1 + 1000));
    CHECK(b->launch_source.empty());  // no host ops: launch times unknown
    CHECK_FALSE(b->total.host_wait_us.has_value());
    CHECK_FALSE(b->total.other_us.has_value());
    HtaOptions exact;
    exact.round_to_us = false;
    const auto e = hta_breakdown(store, 0, exact);
    CHECK(e->total.compute_time_us == Approx(2.2 + 1000));
}

TEST_CASE("HTA figures need device spans, and an imported trace without launch times has its idle breakdown unknown",
          "[cpu][hta]") {
    SyntheticRank cpu(0);
    cpu.step(0, 10, 1);
    cpu.op(1, 2);
    CHECK_FALSE(hta_breakdown(store_of(cpu), 0).has_value());

    const TraceStore imported = store_of(two_streams(), R"({"rank": 0, "world_size": 1, "source": "kineto"})");
    const auto b = hta_breakdown(imported, 0);
    REQUIRE(b.has_value());
    CHECK(b->total.kernel_time_us == Approx(15000));
    CHECK_FALSE(b->total.host_wait_us.has_value());
    const nlohmann::json j = hta_json(*b);
    CHECK(j["idle_breakdown"]["host_wait_us"].is_null());
    CHECK(j["idle_breakdown"]["kernel_wait_us"].is_null());
}

TEST_CASE("process groups numbered past kGroupKinds are bounds-checked, not indexed", "[cpu][hta]") {
    SyntheticRank r(0);
    r.step(0, 10, 1), r.step(10, 20, 2);
    for (int s = 1; s <= 2; ++s) {
        const double t = (s - 1) * 10.0;
        r.op(t + 1, t + 5, s);
        r.comm(t + 4, t + 8, s);
    }
    std::vector<Chunk> chunks = r.chunks(R"({"rank": 0, "world_size": 2})");
    for (EventRecord& e : chunks[1].events)
        if (e.type == uint8_t(EventType::span) && e.span.kind == uint8_t(SpanKind::comm)) {
            e.span.group = uint8_t(kGroupCount + 3);  // an imported trace's fourth process group
            e.span.bytes = 1 << 20;
        }
    TraceStore store;
    for (const Chunk& c : chunks) store.add_chunk(c);
    store.finalize();
    const auto steps = analyze_steps(store, 0);
    REQUIRE(steps.size() == 2);
    CHECK(steps[0].comm_s == Approx(0.004));  // still communication
    CHECK(steps[0].exposed_s == Approx(0.003));
    for (double g : steps[0].group_comm_s) CHECK(g == 0);  // but no known group's
    const Report rep = build_report(store);
    REQUIRE(rep.ranks.size() == 1);
    const nlohmann::json by_group = report_json(rep)["ranks"][0]["comm_by_group_s"];
    CHECK(by_group.size() <= size_t(kGroupCount));
    for (const auto& [name, seconds] : by_group.items()) CHECK(seconds.get<double>() == 0);
}

TEST_CASE("imported traces: a kernel's launch is the launch call inside the op that launched it", "[cpu][hta]") {
    // Host: aten::mm [0.5,1) calls cudaLaunchKernel at 0.6; aten::mm [5.5,6) at 5.6; aten::gelu [11,11.5) at 11.1.
    // Stream 0: K1 [1,3) and K2 [6,7) from aten::mm, K3 [12,14) from aten::gelu.
    SyntheticRank r(0);
    r.step(0, 10, 1), r.step(10, 20, 2), r.step(20, 30, 3);
    r.span(Lane::host, SpanKind::op, 0.5, 1.0, "aten::mm", 1);
    r.span(Lane::host, SpanKind::op, 0.6, 0.62, "cudaLaunchKernel", 1);
    r.span(Lane::host, SpanKind::op, 5.5, 6.0, "aten::mm", 1);
    r.span(Lane::host, SpanKind::op, 5.6, 5.62, "cudaLaunchKernel", 1);
    r.span(Lane::host, SpanKind::op, 11, 11.5, "aten::gelu", 2);
    r.span(Lane::host, SpanKind::op, 11.1, 11.12, "cudaLaunchKernel", 2);
    r.kernel(1, 3, 0, "sm90_gemm", 1);
    r.kernel(6, 7, 0, "sm90_gemm", 1);
    r.kernel(12, 14, 0, "gelu_kernel", 2);
    const uint32_t mm = r.name("aten::mm"), gelu = r.name("aten::gelu");
    std::vector<Chunk> chunks = r.chunks(R"({"rank": 0, "world_size": 1, "source": "kineto"})");
    int kernel = 0;
    for (EventRecord& e : chunks[1].events)
        if (e.type == uint8_t(EventType::span) && e.span.lane == uint8_t(Lane::device))
            e.span.launcher = kernel++ < 2 ? mm : gelu;
    TraceStore store;
    for (const Chunk& c : chunks) store.add_chunk(c);
    store.finalize();
    const auto b = hta_breakdown(store, 0);
    REQUIRE(b.has_value());
    CHECK(b->launch_source.find("measured") != std::string::npos);
    REQUIRE(b->total.host_wait_us.has_value());
    CHECK(*b->total.host_wait_us == Approx(3000 + 5000));  // K2 launched at 5.6 after K1 ended; K3 at 11.1 after K2
    CHECK(*b->total.kernel_wait_us == Approx(0));
    CHECK(*b->total.other_us == Approx(0));
}

TEST_CASE("HTA rounds the float64 of Kineto's microseconds, not their decimal text", "[cpu][hta]") {
    // ns_resolution_trace's epoch times: 1712171498675123.123 us is 1712171498675123.0 as a double (0.25 us apart
    // there), so HTA's ceil gives ...123, not the text's ...124.
    const int64_t begin = 1712171498675123123;
    const auto [b, e] = hta_rounded(begin, begin + 1'800);
    CHECK(b == 1712171498675123000);
    CHECK(e == 1712171498675124000);  // floor(...123.0 + 1.8 = ...124.75 as a double)
    // Small times are exact: a sub-microsecond kernel gets a negative length, as in HTA.
    CHECK(hta_rounded(1'000'400, 1'000'600) == std::pair<int64_t, int64_t>{1'001'000, 1'000'000});
}

TEST_CASE("imported traces: HTA drops kernels without their runtime call and counts rows carrying a stream",
          "[cpu][hta]") {
    // ProfilerStep#0..#2 ([0,10) [10,20) [20,30) ms), stream 7. Kernels: A [1,3) launched at 0.5, B [4,5) whose
    // correlation has no runtime call, C [12,14) launched at 11, D [21,22) launched in the last step at 20.5.
    SyntheticRank r(0);
    r.step(0, 10, 1), r.step(10, 20, 2), r.step(20, 30, 3);
    auto kernel = [&](double b, double e, int step, double launch_ms) {
        r.kernel(b, e, 0, "gelu_kernel", step);
        if (launch_ms >= 0) r.last_span().launch_lead = uint32_t((b - launch_ms) * 1e6) + 1;
    };
    kernel(1, 3, 1, 0.5), kernel(4, 5, 1, -1), kernel(12, 14, 2, 11), kernel(21, 22, 3, 20.5);
    // Rows the reader kept aside: a Stream Sync [5,6) (called at 4.5), a Stream Wait Event [15,16) (at 14.5), a
    // Context Sync without its call, and a cpu_op with args.stream 0 [16,17) (no correlation: its own time).
    const std::string meta = R"({"rank": 0, "world_size": 1, "source": "kineto", "streams": [7],
        "run": {"source": "kineto", "steps_from": "ProfilerStep", "kineto_step_offset": 1},
        "hta_stream_rows": [[5000000, 6000000, 7, "Stream Sync", 4500000, 1],
                            [15000000, 16000000, 7, "Stream Wait Event", 14500000, 1],
                            [7000000, 8000000, 7, "Context Sync", null, 1],
                            [16000000, 17000000, 0, "triton_poi_fused_0", 16000000, 0]]})";
    const auto b = hta_breakdown(store_of(r, meta), 0);
    REQUIRE(b.has_value());
    CHECK(b->kineto_steps == std::vector<int>{0, 1});  // A's and C's (and the Stream Wait Event's) steps
    // Kept: A, the Stream Sync (other), C, the Stream Wait Event and the cpu_op (computation, no "Sync" in them).
    CHECK(b->total.kernels == 5);
    CHECK(b->total.kernel_time_us == Approx(16000));
    CHECK(b->total.idle_time_us == Approx(9000));
    CHECK(b->total.compute_time_us == Approx(6000));
    CHECK(b->total.non_compute_time_us == Approx(1000));
    // The idle breakdown takes only kernels, memcpys and memsets: A then C, C called after A ended.
    REQUIRE(b->total.host_wait_us.has_value());
    CHECK(*b->total.host_wait_us == Approx(9000));
    CHECK(*b->total.kernel_wait_us == Approx(0));
    CHECK(*b->total.other_us == Approx(0));
}

TEST_CASE("imported traces without ProfilerStep list no steps, as HTA", "[cpu][hta]") {
    SyntheticRank r(0);
    r.step(0, 10, 1);  // the reader's step over the whole window
    r.kernel(1, 3, 0, "gelu_kernel", 1);
    r.last_span().launch_lead = 500001;
    const auto b = hta_breakdown(store_of(r, R"({"rank": 0, "world_size": 1, "source": "kineto", "streams": [7],
        "run": {"source": "kineto", "steps_from": "window", "kineto_step_offset": 1}})"),
                                 0);
    REQUIRE(b.has_value());
    CHECK(b->kineto_steps.empty());
    CHECK(b->total.kernel_time_us == Approx(2000));
}
