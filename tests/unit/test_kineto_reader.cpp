// The Kineto (torch.profiler) reader: HTA's real A100 traces and real PyTorch gloo runs (tests/data/kineto), and
// hand-written snippets for each rule of the mapping (docs/pytorch-traces.md) and each kind of bad input.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>

#include "common/core/check.h"
#include "profiler/import/json_stream.h"
#include "profiler/import/kineto_event.h"
#include "profiler/import/run_files.h"
#include "profiler/trace/launch_times.h"
#include "profiler/trace/run_info.h"
#include "test_util.h"

using namespace us::prof;
using us::test::temp_path;
using us::test::write_file;

namespace {

const std::string kData = std::string(US_TEST_DATA_DIR) + "/kineto";

std::string gzip_bytes(const std::string& text) {
    std::string out(compressBound(uLong(text.size())) + 64, '\0');
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = uInt(text.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = uInt(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

// A file in its own fresh folder under the test's temporary directory.
std::string write_trace(const std::string& dir, const std::string& name, const std::string& bytes) {
    const std::string d = temp_path(dir);
    std::filesystem::create_directories(d);
    const std::string path = d + "/" + name;
    write_file(path, bytes);
    return path;
}

std::string trace_json(const std::string& events, const std::string& distributed = "") {
    return "{\"schemaVersion\": 1, " + (distributed.empty() ? "" : "\"distributedInfo\": " + distributed + ", ") +
           "\"traceEvents\": [" + events + "]}";
}

const char* kStep =
    R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000})";

std::vector<const Span*> spans_named(const TraceStore& store, int rank, Lane lane, const std::string& name) {
    std::vector<const Span*> out;
    for (const Span& s : store.rank(rank)->lanes[size_t(lane)].spans())
        if (store.name(s.name) == name) out.push_back(&s);
    return out;
}

bool any_warning(const std::vector<std::string>& w, const std::string& part) {
    return std::any_of(w.begin(), w.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

std::string error_of(const std::vector<std::string>& paths) {
    TraceStore store;
    try {
        load_run(paths, store);
    } catch (const us::UserError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("kineto: HTA's A100 traces load as two GPU ranks with steps, kernels, launchers and NCCL", "[kineto][cpu]") {
    TraceStore store;
    const auto warnings = load_run({kData + "/hta/trace_filter_sampled"}, store);
    REQUIRE(store.ranks() == std::vector<int>{0, 1});
    const RunInfo run = run_info_of(store);
    CHECK(run.source == "kineto");
    CHECK(run.world_size == 128);  // distributedInfo.world_size: the sample is 2 of 128 ranks
    CHECK(run.backend == "nccl");
    CHECK(run.steps_from == "ProfilerStep");
    CHECK(!run.settings.has_value());
    for (int r : {0, 1}) {
        const RankTrace& rt = *store.rank(r);
        CHECK(rt.info.rank_from == "distributedInfo");
        CHECK(rt.has_device_spans());
        // ProfilerStep#551 and #552 -> our steps 552 and 553.
        std::vector<int> steps;
        for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
            if (s.kind == SpanKind::step) steps.push_back(s.step);
        CHECK(steps == std::vector<int>{552, 553});
        // Nearly every kernel knows the CPU op that launched it.
        size_t kernels = 0, launched = 0;
        for (const Span& s : rt.lanes[size_t(Lane::device)].spans()) {
            ++kernels;
            launched += s.launcher != 0;
        }
        CHECK(kernels > 500);
        CHECK(double(launched) / double(kernels) > 0.9);
        CHECK(!rt.lanes[size_t(Lane::device_comm)].spans().empty());
        for (const Span& s : rt.lanes[size_t(Lane::device_comm)].spans()) CHECK(s.kind == SpanKind::comm);
        CHECK(store.rank(r)->ended);
    }
    // The first kernel of the trace: fbgemm's permute, launched by fbgemm::permute_2D_sparse_data.
    const auto permute =
        spans_named(store, 0, Lane::device,
                    "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)");
    REQUIRE(!permute.empty());
    CHECK(store.name(permute.front()->launcher).find("permute") != std::string::npos);
    CHECK(!any_warning(warnings, "python_function"));
}

TEST_CASE("kineto: ranks and process groups from distributedInfo, named and numbered", "[kineto][cpu]") {
    const std::string info = R"({"backend": "nccl", "rank": 2, "world_size": 4, "pg_count": 4, "pg_config": [
        {"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1, 2, 3]},
        {"pg_name": "1", "pg_desc": "mesh_tp", "ranks": [2, 3]},
        {"pg_name": "2", "pg_desc": "TENSOR_MODEL_PARALLEL_GROUP_X", "ranks": [2, 3]},
        {"pg_name": "5", "pg_desc": "my_custom_group", "ranks": [0, 2]}]})";
    const std::string path = write_trace("kineto-groups", "trace.json", trace_json(kStep, info));
    TraceStore store;
    load_run({path}, store);
    REQUIRE(store.ranks() == std::vector<int>{2});
    const RunInfo run = run_info_of(store);
    CHECK(run.world_size == 4);
    REQUIRE(run.process_groups.size() == 4);
    CHECK(run.process_groups[0].kind == "world");
    CHECK(run.process_groups[0].group == 0);
    CHECK(run.process_groups[1].kind == "tp");
    CHECK(run.process_groups[1].kind_from == "description");
    CHECK(run.process_groups[1].group == int(GroupKind::tp));
    CHECK(run.process_groups[2].kind == "tp");
    CHECK(run.process_groups[3].kind.empty());
    CHECK(run.process_groups[3].group == kGroupCount);
    CHECK(group_name(run, kGroupCount) == "my_custom_group");
    CHECK(group_name(run, int(GroupKind::dp)) == "dp");
    // The run description round-trips through JSON.
    const RunInfo back = run_info_from_json(to_json(run));
    CHECK(back.process_groups.size() == 4);
    CHECK(back.process_groups[3].ranks == std::vector<int>{0, 2});
    CHECK(!back.settings.has_value());
}

TEST_CASE(
    "kineto: rank from the file name is warned, a lone file without one is rank 0, two nameless files and two "
    "files of one rank are refused",
    "[kineto][cpu]") {
    const std::string a = write_trace("kineto-ranks", "rank_3.json", trace_json(kStep));
    TraceStore store;
    const auto warnings = load_run({a}, store);
    CHECK(store.ranks() == std::vector<int>{3});
    CHECK(any_warning(warnings, "taken from the file name"));
    CHECK(store.rank(3)->info.rank_from == "file name");
    CHECK(rank_from_file_name("x/rank-12.json.gz") == 12);
    CHECK(rank_from_file_name("rank7_trace.json.gz") == 7);
    CHECK(rank_from_file_name("trace.json") == -1);

    // torch.profiler without torch.distributed writes no distributedInfo: alone, such a file is rank 0 (as HTA
    // reads it), said so; beside another file it could be any rank, and is refused
    const std::string nameless = write_trace("kineto-ranks", "trace.json", trace_json(kStep));
    TraceStore single;
    const auto lone = load_run({nameless}, single);
    CHECK(single.ranks() == std::vector<int>{0});
    CHECK(any_warning(lone, "taken as rank 0"));
    CHECK(single.rank(0)->info.rank_from == "single file");
    const std::string nameless2 = write_trace("kineto-ranks", "trace2.json", trace_json(kStep));
    CHECK_THAT(error_of({nameless, nameless2}), Catch::Matchers::Contains("does not say its rank"));

    const std::string b =
        write_trace("kineto-ranks", "other.json", trace_json(kStep, R"({"rank": 3, "world_size": 4})"));
    const std::string twice = error_of({a, b});
    CHECK_THAT(twice, Catch::Matchers::Contains("rank_3.json"));
    CHECK_THAT(twice, Catch::Matchers::Contains("other.json"));
    CHECK_THAT(twice, Catch::Matchers::Contains("both claim rank 3"));
}

TEST_CASE("kineto: without ProfilerStep the window is one step, and that is warned", "[kineto][cpu]") {
    const std::string ev = R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 2.5})";
    const std::string path =
        write_trace("kineto-window", "rank0.json", trace_json(ev, R"({"rank": 0, "world_size": 1})"));
    TraceStore store;
    const auto warnings = load_run({path}, store);
    CHECK(any_warning(warnings, "no ProfilerStep"));
    const RankTrace& rt = *store.rank(0);
    std::vector<const Span*> steps;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::step) steps.push_back(&s);
    REQUIRE(steps.size() == 1);
    CHECK(steps[0]->step == 1);
    CHECK(steps[0]->begin == 10000);
    CHECK(steps[0]->end == 22500);
    CHECK(imported_run_info(rt).steps_from == "window");
    // A CPU-only rank: its ops are its compute, in step 1, times in ns.
    const auto add = spans_named(store, 0, Lane::compute, "aten::add");
    REQUIRE(add.size() == 1);
    CHECK(add[0]->duration() == 2500);
    CHECK(add[0]->step == 1);
}

TEST_CASE("kineto: without ProfilerStep the optimizer's steps bound the steps, and the optimizer's ops are its own",
          "[kineto][cpu]") {
    // Three iterations: a matmul, then Optimizer.step (an add_ inside it); a nested Optimizer.step is no new step.
    std::string ev;
    for (int k = 0; k < 3; ++k) {
        const int t = 100 * k;
        ev += fmt::format(
            R"({}{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": {}, "dur": 40}},
            {{"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "pid": 1, "tid": 1, "ts": {}, "dur": 30}},
            {{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": {}, "dur": 10}})",
            k ? ",\n" : "", t + 10, t + 60, t + 65);
    }
    ev +=
        R"(, {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#Inner.step", "pid": 1, "tid": 1, "ts": 262, "dur": 5})";
    // a second optimizer stepped after the first in an iteration (Muon and AdamW) ends no step of its own
    ev +=
        R"(, {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#Muon.step", "pid": 1, "tid": 1, "ts": 92, "dur": 3})";
    const std::string path =
        write_trace("kineto-optimizer-steps", "rank0.json", trace_json(ev, R"({"rank": 0, "world_size": 1})"));
    TraceStore store;
    const auto warnings = load_run({path}, store);
    CHECK(any_warning(warnings, "3 steps derived from the optimizer's"));
    const RankTrace& rt = *store.rank(0);
    std::vector<const Span*> steps;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::step) steps.push_back(&s);
    REQUIRE(steps.size() == 3);
    // numbered as ProfilerStep#1.. would be (steps 2..4): none is taken for a run's warm-up first step
    CHECK(steps[0]->step == 2);
    CHECK(steps[0]->begin == 10000);  // the window's start
    CHECK(steps[0]->end == 90000);    // the end of the first Optimizer.step
    CHECK(steps[1]->begin == 90000);
    CHECK(steps[2]->end == 290000);
    CHECK(imported_run_info(rt).steps_from == "Optimizer.step");
    // AdamW's elementwise update inside Optimizer.step is the optimizer's, the matmul a GEMM
    const auto add = spans_named(store, 0, Lane::compute, "aten::add_");
    REQUIRE(add.size() == 3);
    CHECK(add[0]->op == OpClass::optimizer);
    CHECK(spans_named(store, 0, Lane::compute, "aten::mm").front()->op == OpClass::gemm);
}

TEST_CASE("kineto: kernels on their streams carry the launching op, and NCCL kernels are comm with bytes and group",
          "[kineto][cpu]") {
    const std::string info = R"({"backend": "nccl", "rank": 0, "world_size": 2,
        "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1]}, {"pg_name": "7", "pg_desc": "mesh_dp", "ranks": [0, 1]}]})";
    const std::string ev = std::string(kStep) + R"j(,
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1100, "dur": 50},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1110, "dur": 5, "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_f32", "pid": 0, "tid": 7, "ts": 1200, "dur": 30, "args": {"correlation": 7, "stream": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1300, "dur": 50},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1310, "dur": 5, "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 20, "ts": 1400, "dur": 10, "args": {"correlation": 8, "stream": 20}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 1500, "dur": 40,
         "args": {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float", "Process Group Name": "7", "Process Group Description": "mesh_dp"}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1510, "dur": 5, "args": {"correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 30, "ts": 1600, "dur": 100, "args": {"correlation": 9, "stream": 30}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 1750, "dur": 10, "args": {"correlation": 10, "stream": 7, "bytes": 4096}})j";
    const std::string path = write_trace("kineto-gpu", "t.json", trace_json(ev, info));
    TraceStore store;
    load_run({path}, store);
    const auto gemm = spans_named(store, 0, Lane::device, "sm80_xmma_gemm_f32");
    REQUIRE(gemm.size() == 1);
    CHECK(store.name(gemm[0]->launcher) == "aten::mm");
    CHECK(gemm[0]->thread == 0);  // stream 7, first seen
    CHECK(gemm[0]->step == 6);    // ProfilerStep#5
    CHECK(gemm[0]->op == OpClass::gemm);
    const auto add = spans_named(store, 0, Lane::device, "vectorized_elementwise_kernel");
    REQUIRE(add.size() == 1);
    CHECK(add[0]->thread == 1);  // stream 20
    CHECK(store.name(add[0]->launcher) == "aten::add");
    const auto& comm = store.rank(0)->lanes[size_t(Lane::device_comm)].spans();
    REQUIRE(comm.size() == 1);
    CHECK(comm[0].kind == SpanKind::comm);
    CHECK(comm[0].op == OpClass::all_reduce);
    CHECK(comm[0].bytes == 4096);
    CHECK(comm[0].group == int(GroupKind::dp));
    CHECK(store.name(comm[0].launcher) == "record_param_comms");
    const auto copy = spans_named(store, 0, Lane::device, "Memcpy HtoD (Pageable -> Device)");
    REQUIRE(copy.size() == 1);
    CHECK(copy[0]->bytes == 4096);
    // On a GPU rank the CPU ops are the host side.
    CHECK(spans_named(store, 0, Lane::host, "aten::mm").size() == 1);
    CHECK(store.rank(0)->lanes[size_t(Lane::compute)].spans().empty());
    // ... and the same read through the rank metadata's type: an imported rank, its streams by slot
    const us::prof::RankMetadata& typed = store.rank(0)->info;
    CHECK(typed.imported());
    CHECK(typed.stream_ids == nlohmann::json::array({7, 20, 30}));
    CHECK(typed.file.has_value());
    CHECK_FALSE(typed.settings.has_value());  // PyTorch's trace does not say the run's settings: unknown, not defaults
    // The run's description rides in the rank's record under "run", written and read by RunInfo's serializer; the
    // record holds no run-level key beside it (the device backend and PyTorch's gloo/nccl no longer share "backend").
    REQUIRE(typed.run.has_value());
    CHECK(run_info_from_json(*typed.run).source == "kineto");
    CHECK(to_json(run_info_from_json(*typed.run)) == *typed.run);
    CHECK_FALSE(to_json(typed).contains("process_groups"));
    // the reader writes the record through the type (to_json), and it reads back whole
    CHECK(to_json(rank_metadata_from_json(to_json(typed))) == to_json(typed));
}

TEST_CASE(
    "kineto: each kernel's launch is its own launch call, joined by correlation id, across streams taken by turns",
    "[kineto][cpu][hta]") {
    // One op launches onto streams 7 and 8 by turns: K1 (7), K2 (8), K3 (7), K4 (8), launched at 1110, 1120, 1130,
    // 1140. Paired by stream order inside the op, stream 7's second kernel would take the op's second call (1120) and
    // stream 8's first kernel its first (1110); the correlation ids say which call launched which kernel.
    std::string ev = std::string(kStep) + R"(,
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 1100, "dur": 50})";
    const int streams[] = {7, 8, 7, 8};
    for (int k = 0; k < 4; ++k)
        ev += fmt::format(R"(,
        {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": 2, "args": {{"correlation": {}}}}},
        {{"ph": "X", "cat": "kernel", "name": "k{}", "pid": 0, "tid": {}, "ts": {}, "dur": 10, "args": {{"correlation": {}, "stream": {}}}}})",
                          1110 + 10 * k, 40 + k, k + 1, streams[k], 1200 + 20 * k, 40 + k, streams[k]);
    const std::string path = write_trace("kineto-launch", "rank0.json", trace_json(ev));
    TraceStore store;
    load_run({path}, store);
    const LaunchTimes launches = launch_times(store, 0);
    CHECK(launches.source.find("correlation id") != std::string::npos);
    const auto& device = store.rank(0)->lanes[size_t(Lane::device)].spans();
    REQUIRE(device.size() == 4);
    for (size_t i = 0; i < device.size(); ++i) {
        const int k = std::stoi(store.name(device[i].name).substr(1)) - 1;  // k1 .. k4
        CHECK(launches.device[i] == 1000 * int64_t(1110 + 10 * k));
        CHECK(device[i].launch_lead == uint32_t(1000 * (90 + 10 * k) + 1));
    }
}

TEST_CASE("kineto: CPU-only collectives are comm with nelems x dtype bytes, and send and recv are p2p with their peer",
          "[kineto][cpu]") {
    const std::string ev = std::string(kStep) + R"(,
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 1100, "dur": 50,
         "args": {"Collective name": "allgather", "In msg nelems": 500, "Out msg nelems": 1000, "dtype": "BFloat16"}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 1200, "dur": 50,
         "args": {"Input Dims": [[[8, 4]], [], []], "Input type": ["TensorList", "", ""]}},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 1, "ts": 1210, "dur": 30,
         "args": {"Input Dims": [[8, 4]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::send", "pid": 1, "tid": 1, "ts": 1300, "dur": 20,
         "args": {"Concrete Inputs": ["", "", "1", "0"], "Input Dims": [[[2, 64]], [], [], []], "Input type": ["TensorList", "", "Scalar", "Scalar"]}},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:send", "pid": 1, "tid": 1, "ts": 1305, "dur": 10,
         "args": {"Input Dims": [[2, 64]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::recv_", "pid": 1, "tid": 1, "ts": 1400, "dur": 20,
         "args": {"Concrete Inputs": ["", "", "1", "0"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1500, "dur": 20})";
    const std::string path =
        write_trace("kineto-cpu", "t.json", trace_json(ev, R"({"backend": "gloo", "rank": 0, "world_size": 2})"));
    TraceStore store;
    load_run({path}, store);
    const auto gather = spans_named(store, 0, Lane::comm, "record_param_comms");
    REQUIRE(gather.size() == 1);
    CHECK(gather[0]->kind == SpanKind::comm);
    CHECK(gather[0]->op == OpClass::all_gather);
    CHECK(gather[0]->bytes == 2000);  // max(500, 1000) x 2 bytes
    const auto reduce = spans_named(store, 0, Lane::comm, "c10d::allreduce_");
    REQUIRE(reduce.size() == 1);
    CHECK(reduce[0]->op == OpClass::all_reduce);
    CHECK(reduce[0]->bytes == 8 * 4 * 4);  // the TensorList says no dtype: its gloo span's shapes do
    CHECK(spans_named(store, 0, Lane::host, "gloo:all_reduce").size() == 1);  // inside the collective: not compute
    const auto send = spans_named(store, 0, Lane::p2p, "c10d::send");
    REQUIRE(send.size() == 1);
    CHECK(send[0]->op == OpClass::send);
    CHECK(send[0]->peer == 1);
    CHECK(send[0]->bytes == 2 * 64 * 4);
    const auto recv = spans_named(store, 0, Lane::p2p, "c10d::recv_");
    REQUIRE(recv.size() == 1);
    CHECK(recv[0]->op == OpClass::recv);
    CHECK(recv[0]->peer == 1);
    CHECK(spans_named(store, 0, Lane::compute, "aten::mm").size() == 1);
    CHECK(store.rank(0)->lanes[size_t(Lane::compute)].spans().size() == 1);
}

TEST_CASE("kineto: [memory] events become the allocated and reserved counters", "[kineto][cpu]") {
    const std::string ev = std::string(kStep) + R"(,
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1100,
         "args": {"Total Reserved": 2097152, "Total Allocated": 1048576, "Bytes": 1048576, "Device Type": 1, "Device Id": 0}},
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1200,
         "args": {"Total Reserved": 0, "Total Allocated": 4096, "Bytes": 4096, "Device Type": 0, "Device Id": -1}})";
    const std::string path = write_trace("kineto-memory", "t.json", trace_json(ev, R"({"rank": 0})"));
    TraceStore store;
    load_run({path}, store);
    const auto alloc = store.latest_counter("kineto_allocated_bytes");
    REQUIRE(alloc);
    CHECK(alloc->second.value == 1048576);
    CHECK(alloc->second.step == 6);
    REQUIRE(store.latest_counter("kineto_reserved_bytes"));
    CHECK(store.latest_counter("kineto_reserved_bytes")->second.value == 2097152);
    REQUIRE(store.latest_counter("kineto_cpu_allocated_bytes"));
    CHECK(store.latest_counter("kineto_cpu_allocated_bytes")->second.value == 4096);
}

TEST_CASE("kineto: bad input is refused with the file's name and what was read, or skipped and counted",
          "[kineto][cpu]") {
    const std::string good = trace_json(kStep, R"({"rank": 0})");
    // A gzip file cut in half.
    std::string gz = gzip_bytes(good + std::string(20000, ' '));
    const std::string cut = write_trace("kineto-bad", "cut.json.gz", gz.substr(0, gz.size() / 2));
    const std::string cut_error = error_of({cut});
    CHECK_THAT(cut_error, Catch::Matchers::Contains("cut.json.gz"));
    CHECK_THAT(cut_error, Catch::Matchers::Contains("cut short"));
    CHECK_THAT(cut_error, Catch::Matchers::Contains("bytes of JSON read"));
    // The whole gzip file reads.
    TraceStore ok;
    load_run({write_trace("kineto-bad", "whole.json.gz", gz)}, ok);
    CHECK(ok.ranks() == std::vector<int>{0});
    // Invalid JSON, no traceEvents, an event that is not an object, a time that is not a number, too long a time.
    const std::pair<std::string, std::string> bad[] = {
        {R"({"traceEvents": [{"ph": "X", "name": "a" "ts": 1}]})", "expected ',' or '}' in an object"},
        {R"({"distributedInfo": {"rank": 0}})", "no traceEvents"},
        {R"({"traceEvents": [17]})", "event 1 of traceEvents"},
        {R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "soon", "dur": 1}]})",
         "'ts' is not a number"},
        {R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1e300}]})",
         "'dur' is not a number"},
        {R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 99999999999999999999999}]})",
         "'dur' is not a number"},
        {R"j({"traceEvents": [{"ph": "X", "name": "unterminated)j", "the file ends inside"},
        {R"j({"traceEvents": [{"ph": "X"}] )j", "to close the trace's outer object"},
        {"", "found the end of the file"},
    };
    int i = 0;
    for (const auto& [text, expected] : bad) {
        const std::string path = write_trace("kineto-bad", "rank0-" + std::to_string(i++) + ".json", text);
        const std::string e = error_of({path});
        INFO(text);
        CHECK_THAT(e, Catch::Matchers::Contains(expected));
        CHECK_THAT(e, Catch::Matchers::Contains(path));
    }
    // Negative durations and unknown categories are skipped, counted and said; python_function is dropped, counted.
    const std::string ev = std::string(kStep) + R"(,
        {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 1100, "dur": -5},
        {"ph": "X", "cat": "mystery", "name": "m", "pid": 1, "tid": 1, "ts": 1100, "dur": 5},
        {"ph": "X", "cat": "mystery", "name": "m", "pid": 1, "tid": 1, "ts": 1100, "dur": 5},
        {"ph": "X", "cat": "python_function", "name": "f.py(1): g", "pid": 1, "tid": 1, "ts": 1100, "dur": 5})";
    TraceStore store;
    const auto warnings = load_run({write_trace("kineto-bad", "skips.json", trace_json(ev, R"({"rank": 0})"))}, store);
    CHECK(any_warning(warnings, "1 events with a negative duration"));
    CHECK(any_warning(warnings, "2 events of categories the mapping does not read were ignored (2 mystery)"));
    CHECK(any_warning(warnings, "1 python_function events dropped"));
    CHECK(spans_named(store, 0, Lane::compute, "neg").empty());
}

TEST_CASE("kineto: names that are not UTF-8 are kept with '?' and the metadata stays JSON (a fuzzer finding)",
          "[kineto][cpu]") {
    const std::string ev = std::string(kStep) +
                           ",{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"bad\x82name\", \"pid\": 1, "
                           "\"tid\": 1, \"ts\": 1100, \"dur\": 5, \"args\": {\"Process Group Name\": \"g\xff\", "
                           "\"Collective name\": \"allreduce\"}}";
    TraceStore store;
    load_run({write_trace("kineto-utf8", "rank0.json", trace_json(ev))}, store);
    CHECK(store.find_name("bad?name") != UINT32_MAX);
    const RunInfo run = run_info_of(store);
    REQUIRE(run.process_groups.size() == 1);
    CHECK(run.process_groups[0].name == "g?");
    CHECK_NOTHROW(to_json(run).dump());
}

TEST_CASE("kineto: a value longer than the reader's limit is refused, not buffered without end", "[kineto][cpu]") {
    const std::string text = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"" + std::string(5000, 'a') + "\"}]}";
    ByteSource source(text, "huge.json");
    JsonStream in(source, 1024);
    in.expect('{', "here");
    std::string key;
    in.read_string(key, "a key");
    in.expect(':', "here");
    in.expect('[', "here");
    try {
        in.value("an event of traceEvents");
        FAIL("no error");
    } catch (const us::UserError& e) {
        CHECK_THAT(e.what(), Catch::Matchers::Contains("huge.json"));
        CHECK_THAT(e.what(), Catch::Matchers::Contains("longer than 1024 bytes"));
    }
    // The same event under the default limit reads.
    ByteSource whole(text, "huge.json");
    JsonStream ok(whole);
    ok.expect('{', "here");
    ok.read_string(key, "a key");
    ok.expect(':', "here");
    ok.expect('[', "here");
    CHECK(ok.value("an event").size() == 5000 + 23);  // {"ph": "X", "name": "...", the text itself
}

TEST_CASE("kineto: microseconds become nanoseconds exactly", "[kineto][cpu]") {
    int64_t ns = 0;
    CHECK(parse_us_as_ns("1682725898236567", ns));
    CHECK(ns == 1682725898236567000);
    CHECK(parse_us_as_ns("4669914491138.718", ns));
    CHECK(ns == 4669914491138718);
    CHECK(parse_us_as_ns("0.0005", ns));
    CHECK(ns == 1);
    CHECK(parse_us_as_ns("-2.5", ns));
    CHECK(ns == -2500);
    CHECK(parse_us_as_ns("1e3", ns));
    CHECK(ns == 1000000);
    CHECK(!parse_us_as_ns("", ns));
    CHECK(!parse_us_as_ns("12x", ns));
}

TEST_CASE("kineto: the store's memory cap drops op spans (counted) and keeps steps and communication",
          "[kineto][cpu]") {
    TraceStore store(TraceStoreOptions{64 << 10});
    load_run({kData + "/hta/trace_filter_sampled"}, store);
    CHECK(store.spans_dropped_by_cap() > 0);
    CHECK(store.cap_reached_at_step() > 0);
    for (int r : {0, 1}) {
        int steps = 0;
        for (const Span& s : store.rank(r)->lanes[size_t(Lane::host)].spans()) steps += s.kind == SpanKind::step;
        CHECK(steps == 2);
        CHECK(!store.rank(r)->lanes[size_t(Lane::device_comm)].spans().empty());
    }
    TraceStore full;
    load_run({kData + "/hta/trace_filter_sampled"}, full);
    CHECK(full.spans_dropped_by_cap() == 0);
    CHECK(full.span_count() == store.span_count() + store.spans_dropped_by_cap());
}
