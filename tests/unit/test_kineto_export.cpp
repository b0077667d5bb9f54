// The Kineto export (profiler/trace/kineto_export.h) of the committed H100 traces and of a hand-built one: a file
// per rank with distributedInfo and deviceProperties, ProfilerStep#N annotations, every kernel with its stream,
// device and correlation and one cuda_runtime launch of that correlation before it, NCCL kernels named as NCCL
// names them. Whether HTA itself reads it is tests/tools/check_kineto_export_with_hta.py (CI has no HTA).
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/core/check.h"
#include "profiler/analysis/hta_breakdown.h"
#include "profiler/trace/kineto_export.h"
#include "profiler/transport/trace_file.h"
#include "prof_test_util.h"
#include "test_util.h"

using namespace us::prof;

namespace {

std::string read_gz(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    REQUIRE(f);
    std::string text;
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    gzclose(f);
    return text;
}

std::filesystem::path fresh_dir(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / ("us-kineto-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    return dir;
}

struct Checked {
    int kernels = 0, nccl = 0, launches = 0;
    std::set<int> steps;
};

// The structure HTA and TensorBoard rely on, for one exported rank.
Checked check_structure(const nlohmann::json& t, int rank, bool gpu) {
    Checked c;
    REQUIRE(t.contains("traceEvents"));
    CHECK(t["distributedInfo"]["rank"] == rank);
    CHECK(t["distributedInfo"]["world_size"].get<int>() >= 1);
    CHECK(t.contains("deviceProperties") == gpu);
    std::map<int64_t, double> launch_ts;  // correlation -> ts
    std::vector<const nlohmann::json*> kernels;
    for (const auto& e : t["traceEvents"]) {
        const std::string cat = e.value("cat", "");
        const std::string name = e.value("name", "");
        if (e.value("ph", "") != "X") continue;
        if (cat == "user_annotation" && name.rfind("ProfilerStep#", 0) == 0) c.steps.insert(std::stoi(name.substr(13)));
        if (cat == "cuda_runtime" && e["args"].contains("correlation")) {
            CHECK(launch_ts.emplace(e["args"]["correlation"].get<int64_t>(), e["ts"].get<double>()).second);
            ++c.launches;
        }
        if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") kernels.push_back(&e);
    }
    for (const nlohmann::json* k : kernels) {
        const auto& a = (*k)["args"];
        REQUIRE(a.contains("stream"));
        REQUIRE(a.contains("device"));
        REQUIRE(a.contains("correlation"));
        CHECK((*k)["pid"] == a["device"]);
        CHECK((*k)["tid"] == a["stream"]);
        const auto launch = launch_ts.find(a["correlation"].get<int64_t>());
        REQUIRE(launch != launch_ts.end());
        CHECK(launch->second <= (*k)["ts"].get<double>() + 1e-3);
        const std::string name = (*k)["name"];
        if (name.rfind("nccl", 0) == 0) {
            CHECK(hta_kernel_type(name, Lane::device) == HtaKernelType::communication);
            ++c.nccl;
        }
        ++c.kernels;
    }
    return c;
}

}  // namespace

TEST_CASE("NCCL kernel names follow NCCL's", "[cpu][hta][kineto-export]") {
    CHECK(nccl_kernel_name(OpClass::all_reduce, "f32") ==
          "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    CHECK(nccl_kernel_name(OpClass::reduce_scatter, "bf16").rfind("ncclDevKernel_ReduceScatter_Sum_bf16", 0) == 0);
    CHECK(nccl_kernel_name(OpClass::send, "f32").rfind("ncclDevKernel_SendRecv", 0) == 0);
}

TEST_CASE("the Kineto export of the H100 traces: steps, kernels with streams and their launches",
          "[cpu][hta][kineto-export]") {
    for (const std::string file : {"small-h100.ustrace", "dp2-shared-h100.ustrace"}) {
        INFO(file);
        TraceStore store;
        load_trace(std::string(US_TEST_DATA_DIR) + "/gpu/" + file, store);
        const auto dir = fresh_dir(file.substr(0, file.find('.')));
        const auto files = export_kineto_traces(store, dir.string());
        REQUIRE(files.size() == store.ranks().size());
        for (int r : store.ranks()) {
            const std::string path = (dir / fmt::format("rank-{}.pt.trace.json.gz", r)).string();
            REQUIRE(std::filesystem::exists(path));
            const nlohmann::json t = nlohmann::json::parse(read_gz(path));
            const Checked c = check_structure(t, r, true);
            const RankTrace& rt = *store.rank(r);
            const size_t device_spans =
                rt.lanes[size_t(Lane::device)].spans().size() + rt.lanes[size_t(Lane::device_comm)].spans().size();
            CHECK(size_t(c.kernels) == device_spans);
            CHECK(c.launches == c.kernels);
            CHECK(size_t(c.nccl) == rt.lanes[size_t(Lane::device_comm)].spans().size());
            // one ProfilerStep#N per step, N = step - 1
            std::set<int> steps;
            for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
                if (s.kind == SpanKind::step) steps.insert(s.step - 1);
            CHECK(c.steps == steps);
            CHECK(steps.size() >= 2);
        }
        std::filesystem::remove_all(dir);
    }
}

TEST_CASE("the Kineto export of a CPU rank has cpu_op events and no devices, and plain JSON on request",
          "[cpu][hta][kineto-export]") {
    us::test::SyntheticRank r(0);
    r.step(0, 10, 1), r.step(10, 20, 2);
    r.op(1, 4, 1), r.op(11, 14, 2);
    TraceStore store;
    us::test::load(store, r, R"({"rank": 0, "world_size": 1})");
    const auto dir = fresh_dir("cpu");
    const auto files = export_kineto_traces(store, dir.string(), false);
    REQUIRE(files.size() == 1);
    std::ifstream in(files[0]);
    const nlohmann::json t = nlohmann::json::parse(in);
    const Checked c = check_structure(t, 0, false);
    CHECK(c.kernels == 0);
    CHECK(c.steps == std::set<int>{0, 1});
    int cpu_ops = 0;
    for (const auto& e : t["traceEvents"])
        if (e.value("cat", "") == "cpu_op") {
            CHECK(e["name"] == "gemm");
            ++cpu_ops;
        }
    CHECK(cpu_ops == 2);
    std::filesystem::remove_all(dir);
}

TEST_CASE("the Kineto export refuses a folder it cannot create", "[cpu][hta][kineto-export]") {
    TraceStore store;
    us::test::SyntheticRank r(0);
    r.step(0, 1, 1);
    us::test::load(store, r, R"({"rank": 0, "world_size": 1})");
    CHECK_THROWS_AS(export_kineto_traces(store, "/proc/us-no-such-place/out"), us::UserError);
}

// Not run by ctest (hidden): writes a synthetic GPU trace with NCCL kernels overlapping compute on other streams,
// sub-microsecond times and memcpys, for tests/tools/check_kineto_export_with_hta.py to compare the overlap with
// HTA's (the committed H100 traces have no NCCL kernels: MPI with host staging).
//   US_HTA_FIXTURE=/tmp/nccl.ustrace build/bin/ultrascope-tests "[hta-fixture]"
TEST_CASE("a synthetic NCCL trace for the HTA check", "[.][hta-fixture]") {
    const char* out = std::getenv("US_HTA_FIXTURE");
    REQUIRE(out != nullptr);
    auto writer = std::make_shared<TraceFileWriter>(out);
    uint64_t seed = 12345;
    auto next = [&](double lo, double hi) {  // a fixed sequence of numbers in [lo, hi)
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return lo + (hi - lo) * double(seed >> 11) / double(1ull << 53);
    };
    for (int rank = 0; rank < 2; ++rank) {
        us::test::SyntheticRank r(rank, 2);
        double t = 0;
        for (int step = 1; step <= 4; ++step) {
            const double step_begin = t;
            double compute = t + 0.05, comm = t + 0.3;
            for (int k = 0; k < 60; ++k) {
                const double launch = compute - next(0.001, 0.05);
                r.span(Lane::host, SpanKind::op, launch, launch + 0.004, "op", step, OpClass::gemm);
                const double d = next(0.0003, 0.08);
                r.span(Lane::device, SpanKind::op, compute, compute + d, k % 9 == 0 ? "memcpy HtoD" : "sm90_gemm", step,
                       OpClass::gemm);
                compute += d + (k % 7 == 0 ? next(0.01, 0.2) : next(0.0, 0.002));
                if (k % 10 == 5) {
                    const double cd = next(0.05, 0.4);
                    r.nccl(comm, comm + cd, k % 20 == 5 ? OpClass::all_reduce : OpClass::all_gather, 2, step);
                    comm += cd + next(0.01, 0.3);
                }
            }
            t = std::max(compute, comm) + 0.1;
            r.step(step_begin, t, step);
        }
        // Each rank's chunks in turn (a FileSink's finish closes the shared file, so the end chunks go in by hand).
        const std::string meta = fmt::format(R"({{"rank": {}, "world_size": 2, "device": "synthetic"}})", rank);
        writer->append(encode_chunk(ChunkKind::metadata, uint32_t(rank), 0, nullptr, meta));
        writer->append(encode_chunk(ChunkKind::events, uint32_t(rank), 1, &r.batch(), {}));
        writer->append(encode_chunk(ChunkKind::end, uint32_t(rank), 2, nullptr, end_note_json(true, 0, {})));
    }
    writer->close();
    CHECK(writer->error().empty());
}

#if __has_include("profiler/import/run_files.h")
#include "profiler/import/run_files.h"

TEST_CASE("the Kineto export reads back through our Kineto reader with the same HTA figures",
          "[cpu][hta][kineto-export]") {
    TraceStore store;
    load_trace(std::string(US_TEST_DATA_DIR) + "/gpu/dp2-shared-h100.ustrace", store);
    const auto dir = fresh_dir("roundtrip");
    export_kineto_traces(store, dir.string());
    TraceStore back;
    load_run({dir.string()}, back);
    back.finalize();
    REQUIRE(back.ranks() == store.ranks());
    for (int r : store.ranks()) {
        INFO("rank " << r);
        const RankTrace& a = *store.rank(r);
        const RankTrace& b = *back.rank(r);
        CHECK(b.lanes[size_t(Lane::device)].spans().size() + b.lanes[size_t(Lane::device_comm)].spans().size() ==
              a.lanes[size_t(Lane::device)].spans().size() + a.lanes[size_t(Lane::device_comm)].spans().size());
        const auto ha = hta_breakdown(store, r), hb = hta_breakdown(back, r);
        REQUIRE(ha.has_value());
        REQUIRE(hb.has_value());
        CHECK(hb->kineto_steps == ha->kineto_steps);
        CHECK(hb->total.kernel_time_us == Approx(ha->total.kernel_time_us).margin(1));
        CHECK(hb->total.compute_time_us == Approx(ha->total.compute_time_us).margin(1));
        CHECK(hb->total.idle_time_us == Approx(ha->total.idle_time_us).margin(1));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("the Kineto export of an imported trace keeps its streams, kernels and launches",
          "[cpu][hta][kineto-export]") {
    TraceStore store;
    load_run({std::string(US_TEST_DATA_DIR) + "/kineto/hta/nccl_parser_config"}, store);
    store.finalize();
    const auto dir = fresh_dir("imported");
    const auto files = export_kineto_traces(store, dir.string());
    REQUIRE(files.size() == 1);
    const nlohmann::json t = nlohmann::json::parse(read_gz(files[0]));
    const Checked c = check_structure(t, 0, true);
    CHECK(c.kernels == 3774);  // 2700 kernels, 960 memcpys, 114 memsets as HTA's file has them
    CHECK(c.launches == c.kernels);
    std::set<int64_t> streams;
    for (const auto& e : t["traceEvents"])
        if (e.value("cat", "") == "kernel") streams.insert(e["args"]["stream"].get<int64_t>());
    CHECK(streams == std::set<int64_t>{7, 40});  // the file's own CUDA streams
    std::filesystem::remove_all(dir);
}
#endif
