// The hang analysis on real PyTorch Flight Recorder dumps (torch 2.15, gloo on CPU: tests/data/hang, recorded by
// its record_hangs.py): each scenario's verdict as its expected.json says it, including the two on which PyTorch's
// own analyzer blames innocent ranks (size_mismatch) or lists ten false findings (wrapped_16), and the JSON form
// read as the pickle is.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "profiler/hang/flight_reader.h"
#include "profiler/hang/hang_analysis.h"
#include "profiler/hang/hang_report.h"

using namespace us;

namespace {

const std::string kDumps = std::string(US_TEST_DATA_DIR) + "/hang/";

nlohmann::json expected(const std::string& scenario) {
    std::ifstream in(kDumps + scenario + "/expected.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in)["hang"];
}

hang::HangAnalysis analyze(const std::string& scenario) {
    const hang::DumpSet set = hang::load_dumps(hang::find_dump_files({kDumps + scenario}));
    CHECK(set.left_out.empty());
    return hang::analyze_hang(set);
}

// The verdict's kind, culprits, group and collective against the scenario's expected.json.
void check_verdict(const std::string& scenario) {
    INFO(scenario);
    const nlohmann::json want = expected(scenario);
    const hang::HangAnalysis a = analyze(scenario);
    const nlohmann::json got = hang::hang_json(a);
    CHECK(got["kind"] == want["kind"]);
    CHECK(got["culprit_ranks"] == want["culprit_ranks"]);
    CHECK(got["process_group"]["name"] == want["process_group"]["name"]);
    CHECK(got["process_group"]["desc"] == want["process_group"]["desc"]);
    CHECK(got["process_group"]["ranks"] == want["process_group"]["ranks"]);
    CHECK(got["collective"]["seq_id"] == want["collective"]["seq_id"]);
    CHECK(got["collective"]["sizes"] == want["collective"]["sizes"]);
    CHECK(got["collective"]["dtypes"] == want["collective"]["dtypes"]);
    CHECK(std::string(flight::op_short_name(got["collective"]["op"].get<std::string>())) == want["collective"]["op"]);
    if (!want["culprit_ranks"].empty()) CHECK_FALSE(got["stack"].empty());
    // Every victim group the scenario names is held by the root, missing the ranks it names.
    for (const nlohmann::json& victim : want.value("victims", nlohmann::json::array())) {
        bool found = false;
        for (const nlohmann::json& g : got["groups"]) {
            if (g["name"] != victim["process_group"]["name"]) continue;
            found = true;
            CHECK(g["kind"] == "missing");
            CHECK(g["culprit_ranks"] == victim["missing_ranks"]);
            CHECK(g["root"] == false);
            CHECK(g["collective"]["seq_id"] == victim["seq_id"]);
        }
        CHECK(found);
    }
}

}  // namespace

TEST_CASE(
    "hang dumps: a rank that stops, a size mismatch, a tp hang inside dp, 16 wrapped buffers, a healthy "
    "dump: each verdict as recorded",
    "[cpu][hang]") {
    for (const char* scenario : {"rank_stops", "size_mismatch", "tp_inside_dp", "wrapped_16", "healthy_mid_collective"})
        check_verdict(scenario);
    // The mismatch names what the culprit called instead, and both stacks.
    const hang::HangAnalysis m = analyze("size_mismatch");
    CHECK(m.culprit_call.input_sizes == std::vector<std::vector<int64_t>>{{0}});
    CHECK_FALSE(m.reference_stack.empty());
    CHECK(m.verdict.find("rank 1 called gloo:all_reduce [[0]] Float where ranks 0, 2 and 3 called") !=
          std::string::npos);
    // Wrapped: one finding, where PyTorch's analyzer lists eleven.
    const hang::HangAnalysis w = analyze("wrapped_16");
    size_t roots = 0;
    for (const auto& g : w.groups) roots += g.root;
    CHECK(roots == 1);
}

TEST_CASE("hang dumps: gloo records no send or recv, so a p2p deadlock is invisible, and the report says so",
          "[cpu][hang]") {
    const nlohmann::json want = expected("p2p_deadlock");
    REQUIRE(want["visible_in_dumps"] == false);
    const hang::HangAnalysis a = analyze("p2p_deadlock");
    CHECK(a.kind == hang::HangKind::none);
    CHECK(a.unrecorded_ops > 0);
    bool said = false;
    for (const std::string& e : a.evidence) said |= e.find("gloo records no send or recv") != std::string::npos;
    CHECK(said);
    // and the headline: not "nothing is hung", which a reader of a hung job takes as the answer
    CHECK(a.verdict.find("No collective is hung") == 0);
    CHECK(a.verdict.find("a hang there cannot show in these dumps") != std::string::npos);
}

TEST_CASE("hang dumps: the JSON form reads as the pickle does", "[cpu][hang]") {
    const flight::FlightDump pickle = hang::load_flight_dump(kDumps + "rank_stops/comm_lib_trace_rank_2");
    const flight::FlightDump json = hang::load_flight_dump(kDumps + "rank_stops/json/fr_json_rank2.json");
    CHECK(pickle.version == json.version);
    REQUIRE(pickle.entries.size() == json.entries.size());
    for (size_t i = 0; i < pickle.entries.size(); ++i) {
        const auto &p = pickle.entries[i], &j = json.entries[i];
        CHECK(p.collective_seq_id == j.collective_seq_id);
        CHECK(pickle.op_name(p) == json.op_name(j));
        CHECK(p.retired == j.retired);
        CHECK(p.time_started_ns == j.time_started_ns);
        CHECK(pickle.group_name(p.group) == json.group_name(j.group));
    }
    CHECK(pickle.stacks.size() > 1);  // the JSON form keeps no frames
    CHECK(hang::dump_name_parts(kDumps + "rank_stops/json/fr_json_rank2.json").rank == 2);
}

TEST_CASE("hang dumps: a truncated dump, a rank dumped twice and a file that is no dump are named, the rest analysed",
          "[cpu][hang]") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("ultrascope-hang-bad-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (int r = 0; r < 4; ++r)
        fs::copy_file(kDumps + "rank_stops/comm_lib_trace_rank_" + std::to_string(r),
                      dir / ("comm_lib_trace_rank_" + std::to_string(r)));
    fs::copy_file(kDumps + "rank_stops/comm_lib_trace_rank_1", dir / "copy_of_rank_1");
    fs::resize_file(dir / "comm_lib_trace_rank_3", fs::file_size(dir / "comm_lib_trace_rank_3") / 2);
    // named as the dumps are but empty (a rank that died opening it): named too; a notes file is not read
    std::ofstream(dir / "comm_lib_trace_rank_4").flush();
    std::ofstream(dir / "notes.txt") << "the job hung at 03:00\n";
    const std::string snapshot = std::string(US_TEST_DATA_DIR) + "/snapshot/rank0_memory_snapshot.pickle";
    std::vector<std::string> files = hang::find_dump_files({dir.string()});
    files.push_back(snapshot);
    const hang::DumpSet set = hang::load_dumps(files);
    fs::remove_all(dir);
    REQUIRE(set.dumps.size() == 3);  // ranks 0, 1 and 2; rank 3 cut short, rank 1's copy and the snapshot left out
    std::string problems;
    for (const std::string& p : set.left_out) problems += p + "\n";
    INFO(problems);
    CHECK(problems.find("comm_lib_trace_rank_3") != std::string::npos);
    CHECK(problems.find("comm_lib_trace_rank_4: the file is empty") != std::string::npos);
    CHECK(problems.find("notes.txt") == std::string::npos);
    CHECK(problems.find("rank 1 is dumped twice") != std::string::npos);
    CHECK(problems.find(fs::path(snapshot).filename().string()) != std::string::npos);
    // Rank 3's dump is lost: it is a suspect, and rank 2 still the rank that never arrived.
    const hang::HangAnalysis a = hang::analyze_hang(set);
    CHECK(a.culprit_ranks == std::vector<int>{2});
    CHECK(a.absent_ranks == std::vector<int>{3});
}

TEST_CASE("hang dumps: PyTorch profiler traces and memory snapshots are not taken for dumps", "[cpu][hang]") {
    const std::string data = std::string(US_TEST_DATA_DIR);
    CHECK(hang::names_flight_dumps(kDumps + "rank_stops"));
    CHECK(hang::names_flight_dumps(kDumps + "rank_stops/json/fr_json_rank2.json"));
    // Kineto traces name "pg_config" in their distributedInfo, within their first bytes.
    CHECK_FALSE(hang::names_flight_dumps(data + "/kineto/blame/ddp_slow_rank_8"));
    CHECK_FALSE(hang::names_flight_dumps(data + "/kineto/ddp"));
    CHECK_FALSE(hang::names_flight_dumps(data + "/snapshot/rank0_memory_snapshot.pickle"));
    CHECK_FALSE(hang::names_flight_dumps(data + "/cpu/afab-pp1-tp2-tiny.ustrace"));
}
