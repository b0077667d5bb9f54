// A run that hangs ends on its own, and says so: `ultrascope run` with each injected hang (--hang-kind skip,
// mismatch, p2p) notices that no step comes, asks every rank for its flight recorder dump, ends the run with a
// message and a non-zero exit, leaves nothing running, and writes a trace whose ranks hold their dumps, each
// labelled as injected. A healthy run's trace holds none. Bad combinations are refused before anything starts.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "profiler/plain/pickle_reader.h"
#include "profiler/trace/trace_store.h"
#include "test_util.h"

using namespace us;
using namespace us::test;
namespace fs = std::filesystem;

namespace {

std::string ultrascope() { return bin("ultrascope"); }

// One rank's dump, read back as plain data: its entries' (group name, profiling name, state, first input size).
struct Entry {
    std::string group, op, state;
    int64_t size = -1, seq = 0;
    bool p2p = false;
};
struct Dump {
    std::string injected;
    std::vector<Entry> entries;
};

Dump read_dump(const std::string& bytes) {
    const plain::PlainData p = plain::read_pickle(bytes, "dump");
    Dump d;
    std::string_view s;
    if (p.get_string(p.find(p.find(p.root, "ultrascope"), "injected_fault"), s)) d.injected = s;
    for (plain::ValueId e : p.items(p.find(p.root, "entries"))) {
        Entry x;
        if (p.get_string(p.items(p.find(e, "process_group"))[0], s)) x.group = s;
        if (p.get_string(p.find(e, "profiling_name"), s)) x.op = s;
        if (p.get_string(p.find(e, "state"), s)) x.state = s;
        int64_t flag = 0;
        x.p2p = p.get_int(p.find(e, "is_p2p"), flag) && flag;
        p.get_int(p.find(e, x.p2p ? "p2p_seq_id" : "collective_seq_id"), x.seq);
        const auto sizes = p.items(p.find(e, "input_sizes"));
        if (!sizes.empty() && !p.items(sizes[0]).empty()) p.get_int(p.items(sizes[0])[0], x.size);
        d.entries.push_back(x);
    }
    return d;
}

// The last entry of `group` a dump holds.
const Entry* last_in(const Dump& d, const std::string& group) {
    for (auto it = d.entries.rbegin(); it != d.entries.rend(); ++it)
        if (it->group == group) return &*it;
    return nullptr;
}

struct HungRun {
    std::string output;
    int exit_code = -1;
    Dump dumps[2];
    std::string injected_metadata;
    nlohmann::json hang;  // `ultrascope report TRACE --json`'s analysis of the dumps in the trace
};

// Runs `ultrascope run` with an injected hang; fails the test (instead of hanging it) past 60 s.
HungRun run_hung(const std::string& name, const std::string& layout, const std::string& kind) {
    const std::string data = sample_data_file("hang-" + name + ".txt", 20000);
    const std::string trace = temp_path("hang-" + name + ".ustrace");
    fs::remove(trace);
    BackgroundProcess run(ultrascope() + " run -n 2 " + layout + " --trace " + trace +
                              " --preset tiny --steps 1000 --data " + data +
                              " --hang-rank 1 --hang-at-step 3 --hang-kind " + kind + " --hang-timeout 3",
                          temp_path("hang-" + name + ".log"));
    const std::optional<int> code = run.wait_exit(60);
    HungRun r;
    r.output = run.output();
    INFO(r.output);
    REQUIRE(code.has_value());  // it ended on its own
    r.exit_code = *code;
    CHECK(wait_processes_gone(data, 10) == 0);  // mpirun and both ranks are gone
    prof::TraceStore store;
    prof::load_trace(trace, store);
    for (int rank = 0; rank < 2; ++rank) {
        const prof::RankTrace* rt = store.rank(rank);
        REQUIRE(rt);
        INFO("rank " << rank);
        REQUIRE(!rt->flight_dump.empty());
        r.dumps[rank] = read_dump(rt->flight_dump);
        CHECK(rt->info.injected_hang.value_or("").find("--hang-kind " + kind) != std::string::npos);
    }
    const ProcessResult report = run_process(ultrascope() + " report " + trace + " --json");
    INFO(report.output);
    REQUIRE(report.exit_code == 0);
    r.hang = nlohmann::json::parse(report.output).value("hang", nlohmann::json());
    REQUIRE(r.hang.is_object());
    return r;
}

void check_ended_with_message(const HungRun& r, const std::string& kind) {
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("the run stopped making progress at step 3") != std::string::npos);
    CHECK(r.output.find("flight recorder dumps are in the trace") != std::string::npos);
    CHECK(r.output.find("The run hung. What holds the job") != std::string::npos);  // the report, verdict first
    CHECK(r.output.find("injected hang at step 3 (--hang-kind " + kind + ")") != std::string::npos);  // the log
    for (const Dump& d : r.dumps) CHECK(d.injected.find("--hang-kind " + kind) != std::string::npos);
}

}  // namespace

TEST_CASE("a hung run ends with its dumps: a rank that stops calling collectives", "[cpu][app][hang]") {
    const HungRun r = run_hung("skip", "--dp 2", "skip");
    check_ended_with_message(r, "skip");
    // rank 0 entered a data-parallel collective that rank 1, stuck before its step, never did
    const Entry* waiting = last_in(r.dumps[0], "dp:0");
    const Entry* stopped = last_in(r.dumps[1], "dp:0");
    REQUIRE(waiting);
    REQUIRE(stopped);
    CHECK(waiting->state != "completed");
    CHECK(stopped->state == "completed");
    CHECK(waiting->seq > stopped->seq);
    CHECK(r.hang["kind"] == "missing");
    CHECK(r.hang["culprit_ranks"] == nlohmann::json::array({1}));
}

TEST_CASE("a hung run ends with its dumps: a gradient all-reduce of another size", "[cpu][app][hang]") {
    const HungRun r = run_hung("mismatch", "--dp 2", "mismatch");
    check_ended_with_message(r, "mismatch");
    const Entry* real = last_in(r.dumps[0], "dp:0");
    const Entry* other = last_in(r.dumps[1], "dp:0");
    REQUIRE(real);
    REQUIRE(other);
    CHECK(real->seq == other->seq);  // both arrived at the same collective ...
    CHECK(real->op == "mpi:all_reduce");
    CHECK(other->op == "mpi:all_reduce");
    CHECK(real->size != other->size);  // ... with different sizes
    CHECK(real->state == "started");
    CHECK(other->state == "started");
    CHECK(r.hang["kind"] == "mismatch");  // two ranks: a tie, which the verdict says
    CHECK(r.hang["verdict"].get<std::string>().find("no majority") != std::string::npos);
}

TEST_CASE("a hung run ends with its dumps: pipeline stages that both receive", "[cpu][app][hang]") {
    const HungRun r = run_hung("p2p", "--pp 2 --grad-accum 2", "p2p");
    check_ended_with_message(r, "p2p");
    // rank 1 (the last stage) receives from stage 0 where it should send it a gradient; stage 0 waits for that
    const Entry* stage1 = last_in(r.dumps[1], "pp:0");
    REQUIRE(stage1);
    CHECK(stage1->op == "mpi:recv 1<-0");
    CHECK(stage1->state == "started");
    bool stage0_waits = false;
    for (const Entry& e : r.dumps[0].entries)
        stage0_waits |= e.group == "pp:0" && e.op == "mpi:recv 0<-1" && e.state != "completed";
    CHECK(stage0_waits);
    // stage 0's receive has no send to pair with: rank 1 never posted its side (its receives pair with 0's sends)
    CHECK(r.hang["kind"] == "missing");
    CHECK(r.hang["culprit_ranks"] == nlohmann::json::array({1}));
    CHECK(r.hang["verdict"].get<std::string>().find("never posted its side") != std::string::npos);
}

TEST_CASE("a healthy run's trace holds no flight recorder dump", "[cpu][app][hang]") {
    const std::string data = sample_data_file("hang-healthy.txt", 20000);
    const std::string trace = temp_path("hang-healthy.ustrace");
    fs::remove(trace);
    const ProcessResult r =
        run_process(ultrascope() + " run -n 2 --dp 2 --trace " + trace + " --preset tiny --steps 3 --data " + data);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("stopped making progress") == std::string::npos);
    prof::TraceStore store;
    prof::load_trace(trace, store);
    for (int rank = 0; rank < 2; ++rank) {
        REQUIRE(store.rank(rank));
        CHECK(store.rank(rank)->flight_dump.empty());
        CHECK_FALSE(store.rank(rank)->info.injected_hang.has_value());
    }
}

TEST_CASE("injected hangs that cannot happen are refused before the launch", "[cpu][app][hang]") {
    const std::string data = sample_data_file("hang-refused.txt", 20000);
    const std::string base = ultrascope() + " run -n 2 --preset tiny --steps 5 --data " + data + " ";
    const std::pair<std::string, std::string> cases[] = {
        {"--dp 2 --hang-rank 1 --hang-kind p2p", "--hang-kind p2p needs a pipeline"},
        {"--dp 2 --hang-rank 2", "--hang-rank 2: the layout has 2 rank(s)"},
        {"--dp 2 --hang-rank 1 --hang-at-step 9", "--hang-at-step 9: the run's steps are 1 to 5"},
        {"--pp 2 --hang-rank 0 --hang-kind mismatch", "--hang-kind mismatch needs data parallelism"},
        {"--dp 2 --hang-rank 0 --hang-kind stall", "stall"},
        {"--dp 2 --hang-timeout -1", "--hang-timeout must not be negative"},
    };
    for (const auto& [flags, message] : cases) {
        const ProcessResult r = run_process(base + flags);
        INFO(flags << ": " << r.output);
        CHECK(r.exit_code != 0);
        CHECK(r.output.find(message) != std::string::npos);
    }
    CHECK(processes_matching(data) == 0);
}
