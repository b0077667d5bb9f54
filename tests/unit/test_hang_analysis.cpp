// The hang analysis on jobs made in memory (flight_job.h), one per verdict, each worked out by hand: who never
// arrived, who called something else, which sends and receives wait on each other, which group's hang holds the
// others, a buffer that wrapped, a rank without a dump, a whole node. The real PyTorch dumps are
// test_hang_dumps.cpp's.
#include <algorithm>
#include <catch2/catch.hpp>

#include "flight_job.h"
#include "profiler/flight/flight_writer.h"
#include "profiler/hang/flight_reader.h"
#include "profiler/hang/hang_analysis.h"
#include "profiler/hang/hang_report.h"
#include "profiler/hang/hang_verdict_text.h"

using namespace us;
using us::test::FlightJob;

namespace {

hang::HangAnalysis analyze(std::vector<flight::FlightDump> dumps) {
    return hang::analyze_hang(hang::check_dumps(std::move(dumps)));
}

const hang::GroupState& group_named(const hang::HangAnalysis& a, const std::string& name) {
    for (const auto& g : a.groups)
        if (g.name == name) return g;
    FAIL("no group " << name);
    return a.groups.front();
}

// Four steps of one all-reduce each on four ranks, all complete.
FlightJob four_healthy_steps(int world = 4) {
    FlightJob job(world);
    std::vector<int> all;
    for (int r = 0; r < world; ++r) all.push_back(r);
    job.config("0", "default_pg", all);
    for (int step = 0; step < 4; ++step) job.collective("0", "default_pg", all, "nccl:all_reduce", 1024);
    return job;
}

}  // namespace

TEST_CASE("hang: a rank that never enters the collective the others wait in is the culprit, with its last entry",
          "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    job.collective("0", "default_pg", {0, 1, 3}, "nccl:all_reduce", 1024, {0, 1, 3});
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{2});
    CHECK(a.collective.seq_id == 5);
    CHECK(a.collective.op == "nccl:all_reduce");
    REQUIRE(a.group >= 0);
    CHECK(a.groups[size_t(a.group)].ranks == std::vector<int>{0, 1, 2, 3});
    REQUIRE(a.culprits.size() == 1);
    CHECK(a.culprits[0].last_completed.seq_id == 4);
    // its last completed call names its group: a number alone reads as the root group's, which may be another
    CHECK(a.culprits[0].last_completed_group == "group '0' (default_pg)");
    CHECK(std::any_of(a.evidence.begin(), a.evidence.end(), [](const std::string& e) {
        return e.find("rank 2: last completed all_reduce #4 of group '0' (default_pg) (nccl:all_reduce)") !=
               std::string::npos;
    }));
    REQUIRE_FALSE(a.stack.empty());
    CHECK(a.stack[0].file == "train.py");
    CHECK(a.verdict.find("rank 2 never entered all_reduce #5") != std::string::npos);
}

TEST_CASE("hang: a size mismatch blames the member that differs from the majority, not the first file", "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    // Rank 0 is the odd one: a reference taken from the first file would blame the three others.
    job.collective_on(0, "0", "default_pg", "nccl:all_reduce", 2048, false, 5, 77);
    for (int r : {1, 2, 3}) job.collective_on(r, "0", "default_pg", "nccl:all_reduce", 1024, false, 5);
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::mismatch);
    CHECK(a.culprit_ranks == std::vector<int>{0});
    CHECK(a.culprit_call.input_sizes == std::vector<std::vector<int64_t>>{{2048}});
    CHECK(a.collective.input_sizes == std::vector<std::vector<int64_t>>{{1024}});  // what the others agree on
    REQUIRE_FALSE(a.stack.empty());
    CHECK(a.stack[0].line == 77);  // the culprit's own entry, both stacks shown
    CHECK_FALSE(a.reference_stack.empty());
    // A dtype differs just as well.
    FlightJob dtypes = four_healthy_steps();
    for (int r : {0, 1, 2}) dtypes.collective_on(r, "0", "default_pg", "nccl:all_reduce", 1024, false, 5);
    dtypes.collective_on(3, "0", "default_pg", "nccl:all_reduce", 1024, false, 5, 10, "BFloat16");
    CHECK(analyze(dtypes.dumps).culprit_ranks == std::vector<int>{3});
}

TEST_CASE("hang: a mismatch of two members with no majority names both sides, whichever rank is wrong", "[cpu][hang]") {
    for (const int odd : {0, 1}) {
        INFO("rank " << odd << " calls the other size");
        FlightJob job = four_healthy_steps(2);
        job.collective_on(odd, "0", "default_pg", "nccl:all_reduce", 2048, false, 5);
        job.collective_on(1 - odd, "0", "default_pg", "nccl:all_reduce", 1024, false, 5);
        const hang::HangAnalysis a = analyze(job.dumps);
        CHECK(a.kind == hang::HangKind::mismatch);
        CHECK(a.culprit_ranks == std::vector<int>{0, 1});  // never the second one alone
        CHECK(a.verdict.find("ranks 0 and 1 disagree in all_reduce #5") != std::string::npos);
        CHECK(a.verdict.find("no majority") != std::string::npos);
    }
}

// Found by fuzz_flight_reader: the window was walked number by number, so collective numbers far apart (a corrupt
// file's) took the walk forever. It walks the numbers the dumps hold.
TEST_CASE("hang: collective numbers far apart are walked by the entries, and the mismatch beyond the gap is found",
          "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    const int64_t far = int64_t(1) << 62;
    job.collective_on(0, "0", "default_pg", "nccl:all_reduce", 2048, false, far);
    for (int r : {1, 2, 3}) job.collective_on(r, "0", "default_pg", "nccl:all_reduce", 1024, false, far);
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::mismatch);
    CHECK(a.culprit_ranks == std::vector<int>{0});
    CHECK(a.collective.seq_id == far);
}

TEST_CASE("hang: sends and receives that wait on each other are a p2p deadlock, the cycle named", "[cpu][hang]") {
    FlightJob job(2);
    job.config("1", "pp", {0, 1});
    job.p2p(0, "1", "pp", "send", 0, 1, 64, true);
    job.p2p(1, "1", "pp", "recv", 1, 0, 64, true);
    // Both now receive first: each waits for the other's send.
    job.p2p(0, "1", "pp", "recv", 0, 1, 64, false, 31);
    job.p2p(1, "1", "pp", "recv", 1, 0, 64, false, 32);
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::p2p_deadlock);
    CHECK(a.culprit_ranks == std::vector<int>{0, 1});
    CHECK(a.verdict.find("rank 0 waits in recv from rank 1") != std::string::npos);
    // A send answered by its receive is a transfer in flight, not a deadlock.
    FlightJob flowing(2);
    flowing.p2p(0, "1", "pp", "send", 0, 1, 64, false);
    flowing.p2p(1, "1", "pp", "recv", 1, 0, 64, false);
    CHECK(analyze(flowing.dumps).kind == hang::HangKind::none);
}

TEST_CASE("hang: a tp group stuck inside a dp step holds the dp groups too: the root, not its victims", "[cpu][hang]") {
    // dp 2 x tp 4: tp groups t0 = {0..3}, t1 = {4..7}; dp groups d0..d3 = {r, r + 4}.
    FlightJob job(8);
    const std::vector<std::vector<int>> tp = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    for (int step = 0; step < 3; ++step) {
        for (int t = 0; t < 2; ++t)
            job.collective("t" + std::to_string(t), "tp", tp[size_t(t)], "nccl:all_reduce", 512);
        for (int d = 0; d < 4; ++d) job.collective("d" + std::to_string(d), "dp", {d, d + 4}, "nccl:all_reduce", 4096);
    }
    // Step 3: rank 3 stops; its tp peers wait in t0's all-reduce; t1 completes and its ranks wait in dp.
    job.collective("t0", "tp", {0, 1, 2}, "nccl:all_reduce", 512, {0, 1, 2});
    job.collective("t1", "tp", {4, 5, 6, 7}, "nccl:all_reduce", 512);
    for (int d = 0; d < 4; ++d)
        job.collective_on(d + 4, "d" + std::to_string(d), "dp", "nccl:all_reduce", 4096, false, 4);
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{3});
    REQUIRE(a.group >= 0);
    CHECK(a.groups[size_t(a.group)].name == "t0");
    for (const char* victim : {"d0", "d1", "d2"}) {
        const hang::GroupState& d = group_named(a, victim);
        CHECK(d.kind == hang::HangKind::missing);
        CHECK_FALSE(d.root);
        CHECK(a.groups[size_t(d.held_by)].name == "t0");
    }
    CHECK(group_named(a, "t1").kind == hang::HangKind::none);
}

TEST_CASE(
    "hang: buffers that wrapped at different records are trimmed to what every member holds: no false "
    "findings",
    "[cpu][hang]") {
    FlightJob job = four_healthy_steps(16);
    std::vector<int> all;
    for (int r = 0; r < 16; ++r) all.push_back(r);
    for (int step = 0; step < 20; ++step) job.collective("0", "default_pg", all, "nccl:all_reduce", 1024);
    std::vector<int> waiting;
    for (int r = 0; r < 16; ++r)
        if (r != 5) waiting.push_back(r);
    job.collective("0", "default_pg", waiting, "nccl:all_reduce", 1024, waiting);
    // Each rank's ring kept a different number of its newest records.
    for (int r = 0; r < 16; ++r) {
        auto& e = job.dumps[size_t(r)].entries;
        e.erase(e.begin(), e.begin() + r);
    }
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{5});
    CHECK(a.groups.size() == 1);
    CHECK(a.groups[0].window_first == 16);  // rank 15 dropped 15 of 25 records
}

TEST_CASE("hang: everyone inside one collective is not a desync, all complete is nothing", "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    CHECK(analyze(job.dumps).kind == hang::HangKind::none);
    job.collective("0", "default_pg", {0, 1, 2, 3}, "nccl:all_reduce", 1024, {0, 1, 2, 3});
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::inside_collective);
    CHECK(a.culprit_ranks.empty());
    CHECK(a.verdict.find("not a desync") != std::string::npos);
    // A member that entered 5 s after the others is named as late.
    job.dumps[2].entries.back().time_created_ns += 5'000'000'000;
    CHECK(analyze(job.dumps).culprit_ranks == std::vector<int>{2});
}

TEST_CASE("hang: a member whose whole buffer holds none of the group's collectives never entered its first",
          "[cpu][hang]") {
    // Rank 0 hung before its first collective (its dump holds no entry at all); rank 1 waits in all_reduce #1.
    FlightJob job(2);
    job.config("dp:0", "dp", {0, 1});
    job.collective_on(1, "dp:0", "dp", "nccl:all_reduce", 1024, false, 1);
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{0});
    CHECK(a.verdict.find("rank 0 never entered all_reduce #1 of group 'dp:0'") != std::string::npos);
    // Where its buffer wrapped (its oldest entry is not its process's first), it may have entered and lost the
    // entries: nothing is claimed of it from that group.
    FlightJob wrapped(2);
    wrapped.config("dp:0", "dp", {0, 1});
    wrapped.p2p(0, "pp:0", "pp", "send", 0, 1, 16, true);
    wrapped.dumps[0].entries.front().record_id = 500;
    wrapped.collective_on(1, "dp:0", "dp", "nccl:all_reduce", 1024, false, 1);
    const hang::HangAnalysis w = analyze(wrapped.dumps);
    CHECK(w.culprit_ranks != std::vector<int>{0});
}

TEST_CASE("hang: members waiting inside a collective with a member that left no dump are held by that member",
          "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    job.collective("0", "default_pg", {0, 1, 2}, "nccl:all_reduce", 1024, {0, 1, 2});
    auto dumps = job.dumps;
    dumps.erase(dumps.begin() + 3);
    const hang::HangAnalysis a = analyze(dumps);
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{3});
    REQUIRE(a.group >= 0);  // the group it holds, not "every rank that did agrees"
    CHECK(a.groups[size_t(a.group)].kind == hang::HangKind::missing);
    CHECK(a.verdict.find("rank 3 left no dump, and the other members of group '0' (default_pg) wait for it in "
                         "all_reduce #5") != std::string::npos);
    CHECK(a.verdict.find("not a desync") == std::string::npos);
}

TEST_CASE("hang: a culprit that completed work after the others began waiting was still running: the verdict says so",
          "[cpu][hang]") {
    // Dumps taken on demand from a healthy job: rank 0 waits in all_reduce #5, rank 1 had not reached it yet but
    // completed a pipeline send begun 40 ms after rank 0 entered.
    FlightJob job = four_healthy_steps(2);
    job.collective_on(0, "0", "default_pg", "nccl:all_reduce", 1024, false, 5);
    job.p2p(1, "pp:0", "pp", "send", 1, 0, 16, true);
    const int64_t entered = job.dumps[0].entries.back().time_created_ns;
    job.dumps[1].entries.back().time_created_ns = entered + 40'000'000;
    const hang::HangAnalysis a = analyze(job.dumps);
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{1});
    CHECK(a.culprit_active_after_s == Approx(0.040));
    CHECK(a.verdict.find("This holds if the dumps were taken well into the wait: rank 1 completed an operation begun "
                         "40 ms after the others entered it") != std::string::npos);
    // A culprit stuck in another group's collective (begun after, never finished) is no sign of a running job.
    job.dumps[1].entries.back().state = us::flight::EntryState::started;
    job.dumps[1].entries.back().retired = false;
    const hang::HangAnalysis stuck = analyze(job.dumps);
    CHECK(stuck.culprit_active_after_s < 0);
    CHECK(stuck.verdict.find("This holds if") == std::string::npos);
}

TEST_CASE("hang: a rank without a dump is a suspect, the ranks of one host are a node", "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    auto dumps = job.dumps;
    dumps.erase(dumps.begin() + 3);
    const hang::HangAnalysis a = analyze(dumps);
    CHECK(a.absent_ranks == std::vector<int>{3});
    CHECK(a.kind == hang::HangKind::missing);
    CHECK(a.culprit_ranks == std::vector<int>{3});
    REQUIRE(a.culprits.size() == 1);
    CHECK(a.culprits[0].absent);

    FlightJob nodes = four_healthy_steps(8);
    for (int r = 0; r < 8; ++r) nodes.dumps[size_t(r)].host = r < 4 ? "node-a" : "node-b";
    nodes.collective("0", "default_pg", {0, 1, 2, 3}, "nccl:all_reduce", 1024, {0, 1, 2, 3});
    const hang::HangAnalysis n = analyze(nodes.dumps);
    CHECK(n.culprit_ranks == std::vector<int>{4, 5, 6, 7});
    CHECK(n.node == "node-b");
    CHECK(n.verdict.find("node node-b") != std::string::npos);
    const nlohmann::json j = hang::hang_json(n);
    CHECK(j["kind"] == "missing");
    CHECK(j["node"] == "node-b");
    CHECK(j["culprit_ranks"] == nlohmann::json({4, 5, 6, 7}));
    CHECK(j["process_group"]["name"] == "0");
    CHECK(j["collective"]["seq_id"] == 5);
    CHECK(j["ranks"][4]["host"] == "node-b");
}

TEST_CASE("hang: a dump written as PyTorch writes it reads back the same, and bad files are named", "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    job.p2p(1, "1", "pp", "recv", 1, 0, 64, false);
    job.dumps[1].injected_fault = "skip at step 3";
    const std::string bytes = flight::write_flight_dump(job.dumps[1]);
    const flight::FlightDump back = hang::read_flight_dump(bytes, "rank_1");
    CHECK(back.version == "2.10");
    CHECK(back.rank == 1);
    CHECK(back.injected_fault == "skip at step 3");
    REQUIRE(back.entries.size() == job.dumps[1].entries.size());
    const flight::FlightEntry& e = back.entries.back();
    CHECK(e.is_p2p);
    CHECK(e.peer == 0);
    CHECK(back.op_name(e) == "nccl:recv 1<-0");
    CHECK(back.stacks[e.stack].size() == 2);
    CHECK(back.pg_config[0].ranks == std::vector<int>{0, 1, 2, 3});
    CHECK(back.entries[2].collective_seq_id == 3);
    CHECK(back.entries[2].retired);

    CHECK_THROWS_WITH(hang::read_flight_dump(bytes.substr(0, bytes.size() / 2), "cut"), Catch::Contains("cut"));
    CHECK_THROWS_WITH(hang::read_flight_dump(R"({"segments": []})", "snap.json"),
                      Catch::Contains("not a Flight Recorder dump"));
    CHECK_THROWS_WITH(hang::read_flight_dump(R"({"version": "9.1", "entries": []})", "new.json"),
                      Catch::Contains("'9.1' is not one this Ultrascope reads"));
    CHECK_THROWS_WITH(hang::read_flight_dump("hello", "text"), Catch::Contains("neither a pickle nor JSON"));
    // A rank past any job's (found by fuzz_flight_reader: the analysis then listed two billion absent ranks).
    CHECK_THROWS_WITH(
        hang::read_flight_dump(
            R"({"version": "2.4", "pg_config": {"0": {"desc": "default_pg", "ranks": [0, 2147483000]}},
            "entries": []})",
            "huge.json"),
        Catch::Contains("huge.json: 'ranks' holds") && Catch::Contains("where a dump has ranks from 0 to 16777215"));
    CHECK_THROWS_WITH(hang::read_flight_dump(R"({"version": "2.4", "rank": -3, "entries": []})", "negative.json"),
                      Catch::Contains("'rank' holds"));
    const flight::FlightDump json =
        hang::read_flight_dump(R"({"version": "2.4", "pg_config": {}, "entries": [{"record_id": 0,
            "process_group": ["0", "default_pg"], "collective_seq_id": 1, "p2p_seq_id": 0, "op_id": 1,
            "profiling_name": "nccl:broadcast", "input_sizes": [[8]], "input_dtypes": ["Float"],
            "output_sizes": [[8]], "output_dtypes": ["Float"], "state": "completed",
            "time_discovered_started_ns": null, "retired": true, "is_p2p": false, "frames": []}]})",
                               "rank_0.json");
    CHECK(json.entries.size() == 1);
    CHECK(json.op_name(json.entries[0]) == "nccl:broadcast");
    CHECK(json.entries[0].time_started_ns == -1);
}

TEST_CASE("hang: dumps of one rank twice, or of another job, are named and left out", "[cpu][hang]") {
    FlightJob job = four_healthy_steps();
    auto dumps = job.dumps;
    dumps.push_back(job.dumps[2]);
    dumps.back().source = "copy/rank_2";
    dumps.push_back(job.dumps[1]);
    dumps.back().comm_lib_version = "2.18.1";
    dumps.back().source = "old/rank_1";
    const hang::DumpSet set = hang::check_dumps(dumps);
    CHECK(set.dumps.size() == 4);
    REQUIRE(set.left_out.size() == 2);
    CHECK(set.left_out[0].find("old/rank_1: left out: another job's dump") != std::string::npos);
    CHECK(set.left_out[1].find("rank 2 is dumped twice") != std::string::npos);
    CHECK(set.another_jobs_ranks.empty());  // rank 1's own dump is kept: it is not without one
    // A rank whose only file is another job's has no dump of this job, and the words say whose file it was.
    auto only_other = job.dumps;
    only_other[3].comm_lib_version = "2.18.1";
    only_other.push_back(job.dumps[0]);  // a majority for the job's own version
    only_other.back().source = "copy/rank_0";
    const hang::DumpSet other = hang::check_dumps(only_other);
    CHECK(other.another_jobs_ranks == std::vector<int>{3});
    const hang::HangAnalysis a = hang::analyze_hang(other);
    CHECK(a.absent_ranks == std::vector<int>{3});
    CHECK(a.verdict.find("rank 3 left no dump of this job (the file of rank 3 was another job's)") !=
          std::string::npos);
}

TEST_CASE("hang: ranks and hosts from dump file names", "[cpu][hang]") {
    CHECK(hang::dump_name_parts("/x/comm_lib_trace_rank_12").rank == 12);
    CHECK(hang::dump_name_parts("/x/comm_lib_trace_rank_12").host.empty());
    CHECK(hang::dump_name_parts("nccl_trace_rank_3.pkl.gz").rank == 3);
    const hang::DumpNameParts named = hang::dump_name_parts("dumps/node-a_rank_7.pickle");
    CHECK(named.rank == 7);
    CHECK(named.host == "node-a");
    const hang::DumpNameParts trailing = hang::dump_name_parts("fr_gpu-node017_5");
    CHECK(trailing.rank == 5);
    CHECK(trailing.host == "gpu-node017");
    CHECK(hang::dump_name_parts("trace").rank == -1);
}

TEST_CASE("hang: rank lists fold runs of ranks into ranges and stay short at thousands of ranks", "[cpu][hang]") {
    CHECK(us::hang::rank_list({3}) == "rank 3");
    CHECK(us::hang::rank_list({0, 2, 3}) == "ranks 0, 2 and 3");
    CHECK(us::hang::rank_list({0, 1, 2, 3, 7, 9, 10, 11}) == "ranks 0-3, 7 and 9-11");
    std::vector<int> all_but_5;
    for (int r = 0; r < 4096; ++r)
        if (r != 5) all_but_5.push_back(r);
    CHECK(us::hang::rank_list(all_but_5) == "ranks 0-4 and 6-4095");
    std::vector<int> evens;
    for (int r = 0; r < 4096; r += 2) evens.push_back(r);
    const std::string s = us::hang::rank_list(evens);
    CHECK(s.size() < 80);
    CHECK(s.find("(2048 in all)") != std::string::npos);
}
