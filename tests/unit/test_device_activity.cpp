// The CUPTI translation layer without a GPU: kernel names classified and made readable, CUPTI's clock mapped to the
// host clock, op tags found by external correlation id (also while other threads write), synthetic activity
// records turned into device spans, waits and counters, and the recorder's side: op hooks around op zones and
// records from a collector with its own clock.
#include <atomic>
#include <chrono>
#include <thread>

#include "catch_compat.h"
#include "prof_test_util.h"
#include "profiler/record/device_activity.h"
#include "profiler/record/zones.h"

using namespace us;
using namespace us::prof;
using namespace us::test;

namespace {

// The records an emit() produced, by kind.
struct Emitted {
    std::vector<SpanRecord> spans;
    std::vector<CounterRecord> counters;
};
Emitted split(const std::vector<EventRecord>& out) {
    Emitted e;
    for (const EventRecord& r : out) {
        if (r.type == uint8_t(EventType::span)) e.spans.push_back(r.span);
        if (r.type == uint8_t(EventType::counter)) e.counters.push_back(r.counter);
    }
    return e;
}

OpTag tag(OpClass op, int step, int micro_batch, int layer, Phase phase = Phase::forward, int chunk = 0) {
    OpTag t;
    t.name = string_id("test op");
    t.step = step;
    t.micro_batch = int16_t(micro_batch);
    t.layer = int16_t(layer);
    t.op = op;
    t.phase = phase;
    t.chunk = uint8_t(chunk);
    return t;
}

// A translator over its own table and a clock whose CUPTI time runs 1000 ns behind the host.
struct Fixture {
    CorrelationTable ops{1u << 10};
    GpuClockMap clock;
    DeviceActivityTranslator tr{ops, clock, 1u << 10};
    std::vector<EventRecord> out;
    Fixture() { clock.add_sample(1'000'000, 1'001'000); }
    // An op that launched the API call `correlation`.
    void launched_in(uint32_t correlation, const OpTag& t) { tr.add(ExternalCorrelation{ops.open(t), correlation}); }
    Emitted emit(bool final = false) {
        out.clear();
        tr.emit(out, final);
        return split(out);
    }
};

}  // namespace

TEST_CASE("kernel names: NCCL kernels are communication and name their collective, cuBLAS ones are GEMMs",
          "[cpu][profiler]") {
    struct Case {
        const char* name;
        bool nccl;
        OpClass op;
    };
    const Case cases[] = {
        {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", true, OpClass::all_reduce},
        {"ncclKernel_AllReduce_RING_LL_Sum_float", true, OpClass::all_reduce},
        {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", true, OpClass::reduce_scatter},
        {"ncclDevKernel_AllGather_RING_LL", true, OpClass::all_gather},
        {"ncclDevKernel_Broadcast_RING_LL", true, OpClass::broadcast},
        {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", true, OpClass::send},
        {"ncclDevKernel_SendRecv", true, OpClass::send},
        {"ncclDevKernel_Generic", true, OpClass::none},  // grouped operations: the launching op decides
        {"ncclDevKernel_Reduce_Sum_f32_RING_LL", true, OpClass::none},
        {"ampere_sgemm_128x64_tn", false, OpClass::gemm},
        {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", false, OpClass::gemm},
        {"cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_tn_align4>", false, OpClass::gemm},
        {"nvjet_tst_128x64_64x4_1x2_h_bz_TNN", false, OpClass::gemm},
        {"cublasLt::splitKreduce_kernel<32, 16, int, float>", false, OpClass::gemm},
        {"us::cuda::layernorm_forward_kernel<float>", false, OpClass::none},
        {"gelu_kernel", false, OpClass::none},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        const KernelClass k = classify_kernel(c.name);
        CHECK(k.nccl == c.nccl);
        CHECK(k.op == c.op);
    }
}

TEST_CASE("kernel names are demangled, without return type and parameters", "[cpu][profiler]") {
    CHECK(readable_kernel_name("_Z11gelu_kernelIfEvPT_PKS0_i") == "gelu_kernel<float>");
    CHECK(readable_kernel_name("_ZN2us4cuda24layernorm_forward_kernelIfEEvPT_PKS2_i") ==
          "us::cuda::layernorm_forward_kernel<float>");
    CHECK(readable_kernel_name("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE") ==
          "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    CHECK(readable_kernel_name("_ZN12_GLOBAL__N_16kernelEi") == "(anonymous namespace)::kernel");
    CHECK(readable_kernel_name("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn");  // C names stay
    CHECK(readable_kernel_name("_Znot a mangled name") == "_Znot a mangled name");
    // a parameter type does not make a kernel a GEMM once the name is readable
    CHECK(classify_kernel(readable_kernel_name("_Z11gelu_kernel8GemmArgs")).op == OpClass::none);
}

TEST_CASE("the GPU clock map: an offset from one sample, a rate from samples far enough apart", "[cpu][profiler]") {
    GpuClockMap identity;
    CHECK(identity.to_host(12345) == 12345);  // before any sample

    // CUPTI's default clock is CLOCK_REALTIME: ~1.7e18 ns, against a monotonic clock near 1e13 ns.
    const uint64_t g0 = 1'700'000'000'000'000'000ull;
    const int64_t h0 = 10'000'000'000'000;
    GpuClockMap one;
    one.add_sample(g0, h0);
    CHECK(one.to_host(g0) == h0);
    CHECK(one.to_host(g0 + 5'000'000) == h0 + 5'000'000);  // slope 1
    CHECK(one.to_host(g0 - 7) == h0 - 7);
    CHECK(one.offset_ns() == h0 - int64_t(g0));

    // The host clock runs 50 ppm faster: samples a second apart measure it to the nanosecond.
    GpuClockMap rate;
    rate.add_sample(g0, h0);
    rate.add_sample(g0 + 1'000'000'000, h0 + 1'000'050'000);
    CHECK(rate.slope() == Approx(1.00005).epsilon(1e-9));
    CHECK(std::llabs(rate.to_host(g0 + 500'000'000) - (h0 + 500'025'000)) <= 1);
    CHECK(std::llabs(rate.to_host(g0 + 2'000'000'000) - (h0 + 2'000'100'000)) <= 1);

    // Samples a microsecond apart with 300 ns of read jitter cannot measure a rate: slope 1, mean offset.
    GpuClockMap close;
    close.add_sample(g0, h0);
    close.add_sample(g0 + 1000, h0 + 1300);
    CHECK(close.slope() == 1.0);
    CHECK(close.to_host(g0) == h0 + 150);

    // A fitted rate 1 % off is noise, not a clock: rejected.
    GpuClockMap wild;
    wild.add_sample(g0, h0);
    wild.add_sample(g0 + 100'000'000, h0 + 101'000'000);
    CHECK(wild.slope() == 1.0);

    // The fit follows the newest samples: after a step of the CUPTI clock, old samples leave the window.
    GpuClockMap step;
    for (int i = 0; i < 10; ++i) step.add_sample(g0 + uint64_t(i) * 20'000'000, h0 + i * 20'000'000);
    for (int i = 10; i < 10 + int(GpuClockMap::kWindow); ++i)
        step.add_sample(g0 + uint64_t(i) * 20'000'000 + 777, h0 + i * 20'000'000);
    CHECK(step.to_host(g0 + 777) == h0);
}

TEST_CASE("the correlation table finds an op's tag by id until its slot is reused", "[cpu][profiler]") {
    CorrelationTable table(8);
    const OpTag t = tag(OpClass::attention, 123456, -1, -1, Phase::backward, 3);
    const uint64_t id = table.open(t);
    CHECK(id != 0);
    const auto found = table.find(id);
    REQUIRE(found);
    CHECK(found->name == t.name);
    CHECK(found->step == 123456);
    CHECK(found->micro_batch == -1);
    CHECK(found->layer == -1);
    CHECK(found->op == OpClass::attention);
    CHECK(found->phase == Phase::backward);
    CHECK(found->chunk == 3);
    CHECK_FALSE(table.find(0));
    CHECK_FALSE(table.find(id + 1));  // not opened yet
    for (int i = 0; i < 8; ++i) table.open(tag(OpClass::gemm, i, i, i));
    CHECK_FALSE(table.find(id));  // its slot holds a later op now
}

TEST_CASE("the correlation table never hands out a torn tag while threads open ops", "[cpu][profiler]") {
    CorrelationTable table(64);  // small: slots are reused all the time
    // Writers keep opening ops until the reader has checked enough tags: on a loaded machine a fixed number of
    // writes could be over before the reader ran at all.
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> newest{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < 3; ++w)
        writers.emplace_back([&, w] {
            for (int i = 0; !stop.load(std::memory_order_relaxed); i = (i + 1) % 1000000) {
                // every field derives from `step`, so a mix of two tags shows
                const int step = w * 1000000 + i;
                OpTag t;
                t.name = uint32_t(step) * 7u;
                t.step = step;
                t.micro_batch = int16_t(step % 30000);
                t.layer = int16_t(-(step % 20000));
                t.op = OpClass(step % int(OpClass::count));
                t.phase = Phase(step % int(Phase::count));
                t.chunk = uint8_t(step % 251);
                newest.store(table.open(t), std::memory_order_relaxed);
            }
        });
    constexpr uint64_t kChecks = 20000;
    uint64_t found = 0, torn = 0, scans_while_writing = 0;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);  // a broken table fails, not hangs
    while (found < kChecks && std::chrono::steady_clock::now() < deadline) {
        const uint64_t hi = newest.load(std::memory_order_relaxed);
        if (hi == 0) continue;
        ++scans_while_writing;
        for (uint64_t id = hi > 64 ? hi - 64 : 1; id <= hi; ++id)
            if (const auto t = table.find(id)) {
                ++found;
                const int step = t->step;
                torn += t->name != uint32_t(step) * 7u || t->micro_batch != int16_t(step % 30000) ||
                        t->layer != int16_t(-(step % 20000)) || t->op != OpClass(step % int(OpClass::count)) ||
                        t->phase != Phase(step % int(Phase::count)) || t->chunk != uint8_t(step % 251);
            }
    }
    stop = true;
    for (auto& t : writers) t.join();
    CHECK(scans_while_writing > 0);
    CHECK(found >= kChecks);
    CHECK(torn == 0);
}

TEST_CASE("kernels become device spans on their stream, attributed to the op that launched them", "[cpu][profiler]") {
    Fixture f;
    f.launched_in(10, tag(OpClass::norm, 4, 2, 7, Phase::backward, 1));
    f.launched_in(11, tag(OpClass::attention, 4, 2, 7, Phase::backward, 1));
    f.tr.add(KernelActivity{2'000'000, 2'500'000, 1, 7, 10, "_ZN2us4cuda24layernorm_forward_kernelIfEEvPT_PKS2_i"});
    f.tr.add(KernelActivity{2'600'000, 2'900'000, 1, 13, 11, "ampere_sgemm_128x64_tn"});  // cuBLAS on another stream
    const Emitted e = f.emit();
    REQUIRE(e.spans.size() == 2);
    const SpanRecord& norm = e.spans[0];
    CHECK(Lane(norm.lane) == Lane::device);
    CHECK(SpanKind(norm.kind) == SpanKind::op);
    CHECK(OpClass(norm.op) == OpClass::norm);  // the op's class
    CHECK(norm.begin_ns == 2'001'000);         // on the host clock
    CHECK(norm.end_ns == 2'501'000);
    CHECK(norm.step == 4);
    CHECK(norm.micro_batch == 2);
    CHECK(norm.layer == 7);
    CHECK(Phase(norm.phase) == Phase::backward);
    CHECK(norm.chunk == 1);
    CHECK(norm.name == string_id("us::cuda::layernorm_forward_kernel<float>"));
    CHECK(norm.thread == 0);
    const SpanRecord& gemm = e.spans[1];
    CHECK(OpClass(gemm.op) == OpClass::gemm);  // the kernel's own class wins over the attention op's
    CHECK(gemm.thread == 1);
    CHECK(gemm.layer == 7);
    REQUIRE(f.tr.streams().size() == 2);
    CHECK(f.tr.streams()[1] == std::make_pair(1u, 13u));
    CHECK(f.tr.stats().kernels == 2);
    CHECK(f.tr.stats().attributed == 2);
}

TEST_CASE("NCCL kernels go to device_comm as their collective, the op settles send/recv", "[cpu][profiler]") {
    Fixture f;
    f.launched_in(20, tag(OpClass::recv, 3, 1, -1));
    f.launched_in(21, tag(OpClass::reduce_scatter, 3, -1, -1));
    f.launched_in(22, tag(OpClass::gemm, 3, -1, -1));
    f.tr.add(KernelActivity{1'000'000, 1'100'000, 1, 9, 20, "ncclDevKernel_SendRecv"});
    f.tr.add(KernelActivity{1'200'000, 1'300'000, 1, 9, 21, "ncclDevKernel_Generic"});
    f.tr.add(KernelActivity{1'400'000, 1'500'000, 1, 9, 22, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"});
    f.tr.add(KernelActivity{1'600'000, 1'700'000, 1, 9, 23, "ncclDevKernel_AllGather_RING_LL"});  // outside any op
    Emitted e = f.emit();
    REQUIRE(e.spans.size() == 3);
    for (const SpanRecord& s : e.spans) {
        CHECK(Lane(s.lane) == Lane::device_comm);
        CHECK(SpanKind(s.kind) == SpanKind::comm);
    }
    CHECK(OpClass(e.spans[0].op) == OpClass::recv);
    CHECK(e.spans[0].micro_batch == 1);
    CHECK(OpClass(e.spans[1].op) == OpClass::reduce_scatter);
    CHECK(OpClass(e.spans[2].op) == OpClass::all_reduce);  // a compute op around it does not rename a collective
    CHECK(f.tr.waiting() == 1);                            // the unattributed one waits one round
    e = f.emit();
    REQUIRE(e.spans.size() == 1);
    CHECK(OpClass(e.spans[0].op) == OpClass::all_gather);
    CHECK(e.spans[0].step == 0);
    CHECK(e.spans[0].micro_batch == -1);
    CHECK(f.tr.stats().nccl_kernels == 4);
    CHECK(f.tr.stats().unattributed == 1);
}

TEST_CASE("device work whose correlation arrives in a later buffer still finds its op", "[cpu][profiler]") {
    Fixture f;
    const uint64_t id = f.ops.open(tag(OpClass::activation, 9, 0, 2));
    f.tr.add(KernelActivity{3'000'000, 3'100'000, 1, 7, 30, "gelu_kernel"});
    CHECK(f.emit().spans.empty());  // waits
    f.tr.add(ExternalCorrelation{id, 30});
    const Emitted e = f.emit();
    REQUIRE(e.spans.size() == 1);
    CHECK(e.spans[0].step == 9);
    CHECK(OpClass(e.spans[0].op) == OpClass::activation);
    CHECK(f.tr.stats().attributed == 1);
    CHECK(f.tr.waiting() == 0);

    // a final emit lets nothing wait
    f.tr.add(KernelActivity{4'000'000, 4'100'000, 1, 7, 31, "gelu_kernel"});
    CHECK(f.emit(true).spans.size() == 1);
    CHECK(f.tr.stats().unattributed == 1);
}

TEST_CASE("an op whose table entry was reused leaves its kernels unattributed", "[cpu][profiler]") {
    CorrelationTable ops(4);
    GpuClockMap clock;
    DeviceActivityTranslator tr(ops, clock, 1u << 8);
    const uint64_t old = ops.open(tag(OpClass::gemm, 1, 0, 0));
    for (int i = 0; i < 4; ++i) ops.open(tag(OpClass::norm, 2, 0, 0));
    tr.add(ExternalCorrelation{old, 5});
    tr.add(KernelActivity{10, 20, 1, 7, 5, "gelu_kernel"});
    std::vector<EventRecord> out;
    tr.emit(out, true);
    REQUIRE(out.size() == 1);
    CHECK(out[0].span.step == 0);  // not step 2 of the op that took the slot
    CHECK(tr.stats().unattributed == 1);
}

TEST_CASE("memcpy and memset spans carry their bytes and direction, untimed records are left out", "[cpu][profiler]") {
    Fixture f;
    f.launched_in(41, tag(OpClass::embedding, 2, 0, -1));
    f.tr.add(MemcpyActivity{5'000'000, 5'400'000, 4096, 1, 7, 40, 41, MemcpyDirection::host_to_device});
    f.tr.add(MemsetActivity{5'500'000, 5'600'000, 1024, 1, 7, 0});
    f.tr.add(KernelActivity{0, 0, 1, 7, 0, "gelu_kernel"});  // CUPTI could not time it
    const Emitted e = f.emit(true);
    REQUIRE(e.spans.size() == 2);
    CHECK(e.spans[0].name == string_id("memcpy HtoD"));
    CHECK(e.spans[0].bytes == 4096);
    CHECK(OpClass(e.spans[0].op) == OpClass::embedding);  // found through the runtime call
    CHECK(Lane(e.spans[0].lane) == Lane::device);
    CHECK(e.spans[1].name == string_id("memset"));
    CHECK(e.spans[1].bytes == 1024);
    CHECK(f.tr.stats().untimed == 1);
    CHECK(f.tr.stats().memcpys == 1);
    CHECK(f.tr.stats().memsets == 1);
}

TEST_CASE("device memory becomes a reserved-bytes counter, waits and CUPTI's overhead and losses are recorded",
          "[cpu][profiler]") {
    Fixture f;
    f.launched_in(50, tag(OpClass::optimizer, 6, -1, -1));
    f.tr.add(MemoryActivity{1'000'000, 0xA000, 100, true, true, 50});
    f.tr.add(MemoryActivity{2'000'000, 0xB000, 50, true, true, 0});
    f.tr.add(MemoryActivity{2'500'000, 0xC000, 999, true, false, 0});  // pinned host memory: not device
    f.tr.add(MemoryActivity{3'000'000, 0xA000, 0, false, true, 0});    // the release names the address only
    f.tr.add(MemoryActivity{4'000'000, 0xD000, 70, false, true, 0});   // allocated before the collector started
    f.tr.add(SyncActivity{6'000'000, 9'000'000, SyncKind::stream, 0});
    f.tr.add(OverheadActivity{1'000'000, 1'500'000});
    f.tr.add(OverheadActivity{2'000'000, 2'250'000});
    f.tr.add_dropped(12, 7'000'000);
    const Emitted e = f.emit(true);
    std::vector<double> reserved, overhead, dropped;
    for (const CounterRecord& c : e.counters) {
        if (c.name == string_id(kDeviceReservedCounter)) reserved.push_back(c.value);
        if (c.name == string_id(kCuptiOverheadCounter)) overhead.push_back(c.value);
        if (c.name == string_id(kCuptiDroppedCounter)) dropped.push_back(c.value);
    }
    CHECK(reserved == std::vector<double>{100, 150, 50});
    CHECK(overhead == std::vector<double>{0.5, 0.75});
    CHECK(dropped == std::vector<double>{12});
    CHECK(e.counters.front().step == 6);  // the allocation made inside the optimizer op
    CHECK(e.counters.front().t_ns == 1'001'000);
    REQUIRE(e.spans.size() == 1);
    CHECK(Lane(e.spans[0].lane) == Lane::host);
    CHECK(SpanKind(e.spans[0].kind) == SpanKind::wait);
    CHECK(e.spans[0].name == string_id("cudaStreamSynchronize"));
    CHECK(e.spans[0].end_ns - e.spans[0].begin_ns == 3'000'000);
    CHECK(f.tr.stats().unknown_releases == 1);
    CHECK(f.tr.stats().dropped == 12);
    CHECK(f.tr.stats().overhead_ms == Approx(0.75));
}

namespace {
// Test hooks: what enter saw, and how deep the calls nest.
std::vector<OpTag> g_entered;
int g_depth = 0, g_exits = 0;
void test_enter(const OpTag& t) {
    g_entered.push_back(t);
    ++g_depth;
}
void test_exit() {
    --g_depth;
    ++g_exits;
}
constexpr OpHooks kTestHooks{&test_enter, &test_exit};
}  // namespace

TEST_CASE("op zones call the device collector's hooks with the thread's context, other zones do not",
          "[cpu][profiler]") {
    g_entered.clear();
    g_depth = g_exits = 0;
    auto data = std::make_shared<MemorySink::Data>();
    std::vector<std::unique_ptr<EventSink>> sinks;
    sinks.push_back(std::make_unique<MemorySink>(data));
    start_recording(std::move(sinks), R"({"rank": 0})", {.flush_ms = 5});
    install_op_hooks(&kTestHooks);
    {
        US_PROF_STEP(5);
        US_PROF_PHASE(Phase::forward, 3, 1);
        US_PROF_LAYER(2);
        US_PROF_ZONE(Lane::compute, SpanKind::layer, OpClass::none, US_PROF_NAME("block 2"));  // not an op
        {
            US_PROF_ZONE(Lane::host, SpanKind::op, OpClass::gemm, US_PROF_NAME("c_fc"));
            CHECK(g_depth == 1);
            US_PROF_DEVICE_OP(OpClass::all_reduce, US_PROF_NAME("bucket 0"));  // nests inside the op
            CHECK(g_depth == 2);
        }
        CHECK(g_depth == 0);
    }
    install_op_hooks(nullptr);
    { US_PROF_ZONE(Lane::host, SpanKind::op, OpClass::gemm, US_PROF_NAME("no collector")); }
    stop_recording(true);
    install_op_hooks(&kTestHooks);
    { US_PROF_ZONE(Lane::host, SpanKind::op, OpClass::gemm, US_PROF_NAME("not recording")); }
    install_op_hooks(nullptr);
    REQUIRE(g_entered.size() == 2);
    CHECK(g_exits == 2);
    CHECK(g_entered[0].name == string_id("c_fc"));
    CHECK(g_entered[0].op == OpClass::gemm);
    CHECK(g_entered[0].step == 5);
    CHECK(g_entered[0].micro_batch == 3);
    CHECK(g_entered[0].chunk == 1);
    CHECK(g_entered[0].layer == 2);
    CHECK(g_entered[0].phase == Phase::forward);
    CHECK(g_entered[1].op == OpClass::all_reduce);
    CHECK(g_entered[1].name == string_id("bucket 0"));
}

TEST_CASE("records from a collector with its own clock reach the sinks as they are, with their names",
          "[cpu][profiler]") {
    auto data = std::make_shared<MemorySink::Data>();
    std::vector<std::unique_ptr<EventSink>> sinks;
    sinks.push_back(std::make_unique<MemorySink>(data));
    start_recording(std::move(sinks), R"({"rank": 0})", {.flush_ms = 5});
    const uint64_t dropped_before = dropped_events();
    EventRecord e{};
    e.span.type = uint8_t(EventType::span);
    e.span.lane = uint8_t(Lane::device);
    e.span.kind = uint8_t(SpanKind::op);
    e.span.begin_ns = 123'456'789;  // nanoseconds already: must not go through the tick conversion
    e.span.end_ns = 123'456'999;
    e.span.name = string_id("external kernel");
    e.span.thread = 3;
    record_external_events(&e, 1);
    add_dropped_events(5);
    stop_recording(true);
    record_external_events(&e, 1);  // not recording: goes nowhere
    bool found = false, named = false;
    uint64_t dropped_total = 0;
    for (const auto& b : data->batches) {
        for (const auto& s : b.strings) named |= s.text == "external kernel" && s.id == e.span.name;
        for (const auto& r : b.events)
            if (r.type == uint8_t(EventType::span) && r.span.lane == uint8_t(Lane::device)) {
                found = true;
                CHECK(r.span.begin_ns == 123'456'789);
                CHECK(r.span.end_ns == 123'456'999);
                CHECK(r.span.thread == 3);
            }
        dropped_total = std::max(dropped_total, b.dropped_total);
    }
    CHECK(found);
    CHECK(named);
    CHECK(dropped_total == dropped_before + 5);
    CHECK(dropped_events() == dropped_before + 5);
}
