// The Kineto reader on real PyTorch runs (tests/data/kineto, recorded on gloo CPU ranks by
// tests/tools/record_pytorch_traces.sh): every scenario folder opens, its ranks, steps and groups are those its
// meta.json says, file-naming patterns are recognized, and send/recv neighbours are the pipeline's.
#include <filesystem>
#include <fstream>

#include "profiler/analysis/report.h"
#include "profiler/import/run_files.h"
#include "profiler/trace/run_info.h"
#include "test_util.h"

using namespace us::prof;

namespace {

const std::string kData = std::string(US_TEST_DATA_DIR) + "/kineto";

nlohmann::json meta_of(const std::string& scenario) {
    std::ifstream in(kData + "/" + scenario + "/meta.json");
    return nlohmann::json::parse(in);
}

std::vector<int> step_numbers(const RankTrace& rt) {
    std::vector<int> out;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::step) out.push_back(s.step);
    return out;
}

}  // namespace

TEST_CASE("kineto runs: every scenario opens with the ranks and steps its meta.json says", "[kineto][cpu]") {
    for (const char* scenario :
         {"ddp", "fsdp2", "pipeline_gpipe", "pipeline_1f1b", "pipeline_interleaved", "tp", "dp2_tp2"}) {
        INFO(scenario);
        const nlohmann::json meta = meta_of(scenario);
        TraceStore store;
        const auto warnings = load_run({kData + "/" + scenario}, store);
        const int ranks = meta["ranks"].get<int>();
        REQUIRE(int(store.ranks().size()) == ranks);
        const RunInfo run = run_info_of(store);
        CHECK(run.world_size == ranks);
        CHECK(run.backend == "gloo");
        // meta.json (and ddp's memory timeline) are not traces: skipped, and said.
        CHECK(std::any_of(warnings.begin(), warnings.end(),
                          [](const std::string& w) { return w.find("meta.json: skipped") != std::string::npos; }));
        std::vector<int> expected_steps;
        for (const auto& n : meta["steps_recorded"]) expected_steps.push_back(n.get<int>() + run.kineto_step_offset);
        for (int r = 0; r < ranks; ++r) {
            const RankTrace& rt = *store.rank(r);
            CHECK(rt.info.rank_from == "distributedInfo");
            CHECK(rt.info.host == "vm");  // Kineto's top-level host_name
            CHECK(step_numbers(rt) == expected_steps);
            CHECK(!rt.has_device_spans());  // CPU ranks: ops are compute, collectives comm
            CHECK(!rt.lanes[size_t(Lane::compute)].spans().empty());
            CHECK(!rt.lanes[size_t(Lane::comm)].spans().empty() + !rt.lanes[size_t(Lane::p2p)].spans().empty() >= 1);
            CHECK(store.rank(r)->counters.count(store.find_name("kineto_cpu_allocated_bytes")) == 1);
        }
    }
}

TEST_CASE("kineto runs: the 2-D mesh's groups are named from their descriptions", "[kineto][cpu]") {
    TraceStore store;
    load_run({kData + "/dp2_tp2"}, store);
    const RankTrace& rt = *store.rank(0);
    const RunInfo info = imported_run_info(rt);
    std::map<std::string, std::vector<int>> kinds;
    for (const auto& g : info.process_groups) kinds[g.kind] = g.ranks;
    CHECK(kinds["world"] == std::vector<int>{0, 1, 2, 3});
    CHECK(kinds["dp"] == std::vector<int>{0, 2});  // mesh [[0, 1], [2, 3]]: dp down the columns
    CHECK(kinds["tp"] == std::vector<int>{0, 1});
    for (const auto& g : info.process_groups) CHECK(g.kind_from == "description");
}

TEST_CASE("kineto runs: pipeline sends and receives are p2p spans to the neighbouring stage's rank", "[kineto][cpu]") {
    for (const char* scenario : {"pipeline_gpipe", "pipeline_1f1b", "pipeline_interleaved"}) {
        INFO(scenario);
        TraceStore store;
        load_run({kData + "/" + scenario}, store);
        for (int r : {0, 1}) {
            int sends = 0, recvs = 0;
            for (const Span& s : store.rank(r)->lanes[size_t(Lane::p2p)].spans()) {
                CHECK(s.kind == SpanKind::comm);
                CHECK(s.peer == 1 - r);  // two ranks: the other one
                sends += s.op == OpClass::send;
                recvs += s.op == OpClass::recv;
                // The c10d op carries the bytes; gloo's async span of the same transfer (its time) carries none.
                const bool c10d = store.name(s.name).rfind("c10d::", 0) == 0;
                if (s.op == OpClass::send && c10d) CHECK(s.bytes > 0);
                if (!c10d) CHECK(s.bytes == 0);
            }
            CHECK(sends > 0);
            CHECK(recvs > 0);
        }
    }
}

TEST_CASE("kineto runs: file naming patterns and folders", "[kineto][cpu]") {
    // torchtitan: iteration_N/rankR_trace.json.gz; Megatron-LM: rank-R.json.gz; tensorboard:
    // host_pid.*.pt.trace.json.gz.
    CHECK(find_run_files({kData + "/tp"}).files.size() == 2);
    CHECK(rank_from_file_name(kData + "/tp/iteration_4/rank1_trace.json.gz") == 1);
    CHECK(rank_from_file_name(kData + "/fsdp2/rank-1.json.gz") == 1);
    CHECK(rank_from_file_name("vm_20223.1795526751102024081.pt.trace.json.gz") == -1);
    // Two files named one by one work like their folder.
    TraceStore store;
    load_run({kData + "/fsdp2/rank-1.json.gz", kData + "/fsdp2/rank-0.json.gz"}, store);
    CHECK(store.ranks() == std::vector<int>{0, 1});
    // ddp's rank 0 was recorded with_stack: its python_function events are dropped and counted.
    TraceStore ddp;
    const auto warnings = load_run({kData + "/ddp"}, ddp);
    CHECK(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
        return w.find("python_function events dropped") != std::string::npos;
    }));
    // A torchtitan parent folder with several iterations: the newest is opened, and that is said.
    const std::string parent = us::test::temp_path("kineto-iterations");
    for (const char* it : {"iteration_2", "iteration_10"}) {
        std::filesystem::create_directories(parent + "/" + it);
        for (const char* f : {"rank0_trace.json.gz", "rank1_trace.json.gz"})
            std::filesystem::copy_file(kData + "/tp/iteration_4/" + f, parent + "/" + it + "/" + f,
                                       std::filesystem::copy_options::overwrite_existing);
    }
    const RunFiles files = find_run_files({parent});
    REQUIRE(files.files.size() == 2);
    CHECK(files.files[0].find("iteration_10") != std::string::npos);
    REQUIRE(files.warnings.size() == 1);
    CHECK(files.warnings[0].find("opened the newest, iteration_10") != std::string::npos);
}

TEST_CASE(
    "kineto runs: an imported run's report predicts nothing, so it misses nothing, and its host lanes are by thread",
    "[kineto][cpu]") {
    TraceStore store;
    load_run({kData + "/dp2_tp2"}, store);
    const Report rep = build_report(store);
    CHECK(rep.imported);
    CHECK(rep.misses.empty());
    const nlohmann::json j = report_json(rep);
    CHECK(j["misses"].empty());
    for (const auto& rank : j["ranks"]) CHECK(rank["host"] == "vm");  // each rank's host, from Kineto's host_name
    const std::string text = format_report(rep);
    CHECK(text.find("UNEXPLAINED") == std::string::npos);
    // The threads of a PyTorch process (main, autograd, gloo's run loop) each get rows of their own.
    const LaneTrack& host = store.rank(0)->lanes[size_t(Lane::host)];
    REQUIRE(host.rows_by_thread());
    for (int row = 0; row < host.rows(); ++row)
        for (uint32_t i : host.row(row)) CHECK(host.spans()[i].thread == host.row_thread(row));
}
