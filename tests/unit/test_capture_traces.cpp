// The capture's post-processing (profiler/capture) on real on-demand Kineto traces (tests/data/capture, recorded
// from a running 2-rank torchrun job through the daemon protocol by record_traces.py): the rank files it writes open
// as a run with both ranks and their steps, a rank that lacks a step or ran other steps is named, and a damaged raw
// trace is refused with nothing written.
#include <filesystem>
#include <fstream>

#include "app/report/run_report.h"
#include "common/core/check.h"
#include "profiler/capture/captured_rank.h"
#include "profiler/capture/raw_trace.h"
#include "profiler/capture/step_check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/run_files.h"
#include "profiler/trace/run_info.h"
#include "test_util.h"

using namespace us;
using us::test::temp_path;
namespace fs = std::filesystem;

namespace {

const std::string kCapture = std::string(US_TEST_DATA_DIR) + "/capture/ddp_mlp";

// The ranks as the manifest the recorder wrote says them.
std::vector<capture::CapturedRank> captured(const std::string& dir = kCapture) {
    std::ifstream in(dir + "/manifest.json");
    REQUIRE(in.good());
    const nlohmann::json m = nlohmann::json::parse(in);
    std::vector<capture::CapturedRank> out;
    for (const auto& r : m["ranks"]) {
        capture::CapturedRank c;
        c.rank = r["rank"], c.world_size = r["world_size"], c.local_rank = r["local_rank"], c.pid = r["pid"];
        c.host = r["host"];
        c.raw_trace = dir + "/" + r["raw_trace"].get<std::string>();
        out.push_back(c);
    }
    return out;
}

nlohmann::json raw_json(const std::string& path) {
    prof::ByteSource source(path);
    std::string text(1 << 16, '\0'), all;
    for (size_t n; (n = source.read(text.data(), text.size())) > 0;) all.append(text, 0, n);
    return nlohmann::json::parse(all);
}

std::string write_json(const nlohmann::json& j, const std::string& name) {
    const std::string path = temp_path(name);
    std::ofstream(path) << j.dump();
    return path;
}

std::string fresh_dir(const std::string& name) {
    const std::string dir = temp_path(name);
    fs::remove_all(dir);
    return dir;
}

std::vector<int> step_numbers(const prof::RankTrace& rt) {
    std::vector<int> out;
    for (const prof::Span& s : rt.lanes[size_t(prof::Lane::host)].spans())
        if (s.kind == prof::SpanKind::step) out.push_back(s.step);
    return out;
}

bool folder_empty(const std::string& dir) { return !fs::exists(dir) || fs::is_empty(dir); }

}  // namespace

TEST_CASE("capture traces: steps are derived from the optimizer steps of a real on-demand trace", "[capture][cpu]") {
    for (const auto& r : captured()) {
        const capture::RawTrace t = capture::read_raw_trace(r.raw_trace);
        CHECK(t.distributed_info.is_null());  // what Kineto writes on demand: no rank inside
        CHECK(t.profiler_steps.empty());      // and no ProfilerStep markers
        CHECK(t.has_window);
        CHECK(t.backend == "gloo");
        REQUIRE(t.optimizer_steps.size() == 3);  // ACTIVITIES_ITERATIONS=3
        const auto steps = capture::derive_steps(t);
        REQUIRE(steps.size() == 3);
        CHECK(steps[0].begin == t.window_begin);
        for (size_t k = 0; k < steps.size(); ++k) {
            CHECK(steps[k].end == t.optimizer_steps[k].end);
            if (k > 0) CHECK(steps[k].begin == steps[k - 1].end);
            CHECK(steps[k].begin < t.optimizer_steps[k].begin);
        }
    }
}

TEST_CASE("capture traces: the rank files open as a run with both ranks and the same steps", "[capture][cpu]") {
    const std::string out = fresh_dir("capture_ok");
    const capture::CaptureSummary s = capture::finish_capture(captured(), out);
    INFO(s.message);
    CHECK(s.same_steps);
    CHECK(s.steps == 3);
    REQUIRE(s.rank_files.size() == 2);
    CHECK(fs::path(s.rank_files[0]).filename() == "rank0.vm.pt.trace.json.gz");
    CHECK(fs::path(s.rank_files[1]).filename() == "rank1.vm.pt.trace.json.gz");
    CHECK(s.message.find("3 steps on every rank") != std::string::npos);

    prof::TraceStore store;
    const auto warnings = prof::load_run({out}, store);
    for (const auto& w : warnings) CHECK(w.find("ProfilerStep") == std::string::npos);
    REQUIRE(store.ranks().size() == 2);
    const prof::RunInfo run = prof::run_info_of(store);
    CHECK(run.world_size == 2);
    CHECK(run.backend == "gloo");
    CHECK(run.steps_from == "ProfilerStep");
    for (int r = 0; r < 2; ++r) {
        const prof::RankTrace& rt = *store.rank(r);
        CHECK(rt.info.rank_from == "distributedInfo");
        CHECK(step_numbers(rt).size() == 3);
        CHECK(step_numbers(rt) == step_numbers(*store.rank(0)));
    }
    // The report `ultrascope report DIR` prints, from the same folder.
    app::ReportOptions options;
    options.no_cache = true;
    const app::RunReport report = app::make_run_report(app::ReportSource::of_files({out}), options);
    REQUIRE(report.whole);
    CHECK(report.whole->ranks.size() == 2);
    CHECK(app::run_report_exit_code(report) == 0);
    fs::remove_all(out);
}

TEST_CASE("capture traces: a rank that lacks a step is named", "[capture][cpu]") {
    auto ranks = captured();
    nlohmann::json j = raw_json(ranks[1].raw_trace);
    auto& events = j["traceEvents"];
    size_t last = 0;
    for (size_t i = 0; i < events.size(); ++i)
        if (events[i].value("name", "").rfind("Optimizer.step#", 0) == 0) last = i;
    REQUIRE(last > 0);
    events.erase(events.begin() + long(last));
    ranks[1].raw_trace = write_json(j, "capture_lacks_step.json");
    const std::string out = fresh_dir("capture_lacks");
    const capture::CaptureSummary s = capture::finish_capture(ranks, out);
    INFO(s.message);
    CHECK_FALSE(s.same_steps);
    CHECK(s.steps == 2);
    CHECK(s.message.find("rank 1 captured 2 steps where rank 0 captured 3") != std::string::npos);
    CHECK(s.rank_files.size() == 2);  // written all the same: the caller says what to make of it
    fs::remove_all(out);
}

TEST_CASE("capture traces: a rank that captured other steps is named", "[capture][cpu]") {
    auto ranks = captured();
    nlohmann::json j = raw_json(ranks[0].raw_trace);
    j["baseTimeNanoseconds"] = j["baseTimeNanoseconds"].get<int64_t>() + 1000000000;  // one second later
    ranks[0].raw_trace = write_json(j, "capture_other_steps.json");
    const std::string out = fresh_dir("capture_other");
    const capture::CaptureSummary s = capture::finish_capture(ranks, out);
    INFO(s.message);
    CHECK_FALSE(s.same_steps);
    CHECK(s.steps == 3);
    CHECK(s.message.find("rank 1 ran other steps: its step 1 overlaps rank 0's step 1 by 0%") != std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("capture traces: a cut or garbage raw trace is refused and nothing is written", "[capture][cpu]") {
    auto ranks = captured();
    const std::string whole = raw_json(ranks[1].raw_trace).dump();
    const std::string cut = temp_path("capture_cut.json"), garbage = temp_path("capture_garbage.json");
    std::ofstream(cut) << whole.substr(0, whole.size() / 2);
    std::ofstream(garbage) << "this is not a trace";
    for (const std::string& bad : std::vector<std::string>{cut, garbage}) {
        INFO(bad);
        ranks[1].raw_trace = bad;
        const std::string out = fresh_dir("capture_bad");
        try {
            capture::finish_capture(ranks, out);
            FAIL("a damaged trace was accepted");
        } catch (const UserError& e) {
            const std::string what = e.what();
            CHECK(what.find(bad) != std::string::npos);
            CHECK(what.find("rank 1") != std::string::npos);
        }
        CHECK(folder_empty(out));
        fs::create_directories(out);  // an existing folder is left as it was
        CHECK_THROWS_AS(capture::finish_capture(ranks, out), UserError);
        CHECK(folder_empty(out));
        fs::remove_all(out);
    }
}

TEST_CASE("capture traces: ranks given wrong and a folder holding another run are refused", "[capture][cpu]") {
    auto ranks = captured();
    const std::string out = fresh_dir("capture_refused");
    auto twice = ranks;
    twice[1].rank = 0;
    CHECK_THROWS_WITH(capture::finish_capture(twice, out), Catch::Contains("rank 0 was captured twice"));
    auto no_rank = ranks;
    no_rank[0].rank = -1;
    CHECK_THROWS_WITH(capture::finish_capture(no_rank, out), Catch::Contains("is not a rank"));
    CHECK_THROWS_AS(capture::finish_capture({}, out), UserError);
    fs::create_directories(out);
    std::ofstream(out + "/rank0.other.pt.trace.json") << "{}";
    CHECK_THROWS_WITH(capture::finish_capture(ranks, out), Catch::Contains("a trace of another run"));
    CHECK(fs::exists(out + "/rank0.other.pt.trace.json"));
    CHECK(!fs::exists(out + "/rank0.vm.pt.trace.json.gz"));
    fs::remove_all(out);
    // the raw traces inside the folder of rank files: named as such
    fs::create_directories(out);
    fs::copy_file(ranks[1].raw_trace, out + "/trace_1.json.gz");
    ranks[1].raw_trace = out + "/trace_1.json.gz";
    CHECK_THROWS_WITH(capture::finish_capture(ranks, out), Catch::Contains("rank 1's raw trace"));
    CHECK(!fs::exists(out + "/rank0.vm.pt.trace.json.gz"));
    fs::remove_all(out);
}

TEST_CASE("capture traces: ranks one step apart are told apart, a small skew is not", "[capture][cpu]") {
    const int64_t ms = 1000000;
    auto steps_from = [&](int64_t start, int64_t skew) {
        std::vector<capture::TimeSpan> s;
        for (int64_t k = 0; k < 3; ++k) s.push_back({(start + 10 * k) * ms + skew, (start + 10 * (k + 1)) * ms + skew});
        return s;
    };
    const capture::RankSteps rank0{0, steps_from(0, 0), 0};
    // one step later: its step K shares only a boundary with rank 0's step K
    capture::StepCheck late = capture::check_same_steps({rank0, {1, steps_from(10, 0), 0}});
    CHECK_FALSE(late.same);
    CHECK(late.what.find("rank 1 ran other steps: its step 1 overlaps rank 0's step 1 by 0%") != std::string::npos);
    // the same steps, rank 1's clock base 1 ms ahead (another node): still the same steps
    CHECK(capture::check_same_steps({rank0, {1, steps_from(0, 0), ms}}).same);
    // 4 ms apart on one clock: 6 of 10 ms shared, the same step; 6 ms apart: 4 of 10 shared, not
    CHECK(capture::check_same_steps({rank0, {1, steps_from(0, 4 * ms), 0}}).same);
    CHECK_FALSE(capture::check_same_steps({rank0, {1, steps_from(0, 6 * ms), 0}}).same);
    // a rank with no optimizer step at all
    const capture::StepCheck none = capture::check_same_steps({rank0, {1, {}, 0}});
    CHECK_FALSE(none.same);
    CHECK(none.steps == 0);
    CHECK(none.what.find("rank 1 captured 0 steps where rank 0 captured 3") != std::string::npos);
}

TEST_CASE("capture traces: a trace that names its rank and steps itself keeps them, and must agree", "[capture][cpu]") {
    // HTA's NCCL trace, written by torch.profiler: distributedInfo (rank 0 of 2, nccl) and ProfilerStep# spans.
    const std::string raw =
        std::string(US_TEST_DATA_DIR) + "/kineto/hta/nccl_parser_config/nccl_parser_config_nccl_data.json.gz";
    capture::CapturedRank r;
    r.rank = 0, r.world_size = 2, r.local_rank = 0, r.pid = 7, r.host = "gpu-node", r.raw_trace = raw;
    const std::string out = fresh_dir("capture_own_steps");
    const capture::CaptureSummary s = capture::finish_capture({r}, out);
    REQUIRE(s.rank_files.size() == 1);
    const capture::RawTrace before = capture::read_raw_trace(raw), after = capture::read_raw_trace(s.rank_files[0]);
    REQUIRE(before.profiler_steps.size() == 3);  // ProfilerStep#4..6 on the host, not their GPU copies
    CHECK(before.optimizer_steps.size() == 3);
    CHECK(before.step_tid == 2910249);                                   // the host thread, not a GPU stream
    CHECK(after.profiler_steps.size() == before.profiler_steps.size());  // none added
    CHECK(s.steps == int(before.profiler_steps.size()));
    CHECK(after.events == before.events);
    CHECK(after.distributed_info["backend"] == "nccl");
    CHECK(after.distributed_info["nccl_version"] == before.distributed_info["nccl_version"]);
    fs::remove_all(out);
    r.world_size = 8;  // the environment disagrees with the trace
    CHECK_THROWS_WITH(capture::finish_capture({r}, out), Catch::Contains("says world_size 2 in its distributedInfo"));
    CHECK(folder_empty(out));
}

TEST_CASE("capture traces: a raw trace still being written is told from a finished one", "[capture][cpu]") {
    const auto ranks = captured();
    CHECK(capture::raw_trace_complete(ranks[0].raw_trace));  // gzip, read through
    std::string whole;
    {
        prof::ByteSource source(ranks[0].raw_trace);
        std::string piece(1 << 16, '\0');
        for (size_t n; (n = source.read(piece.data(), piece.size())) > 0;) whole.append(piece, 0, n);
    }
    const std::string plain = temp_path("capture_plain.json");
    std::ofstream(plain) << whole;
    CHECK(capture::raw_trace_complete(plain));  // as Kineto leaves it: the tail only
    for (size_t cut : {whole.size() / 2, whole.find("\"traceName\"")}) {
        std::ofstream(plain, std::ios::trunc) << whole.substr(0, cut);
        CHECK_FALSE(capture::raw_trace_complete(plain));
    }
    CHECK_FALSE(capture::raw_trace_complete(temp_path("capture_absent.json")));
    // Older Kineto's end, and a file cut right after an event's args (no comma yet)
    const std::string window_end = R"({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "ts": 5})";
    std::ofstream(plain, std::ios::trunc) << "{\"traceEvents\": [\n" << window_end << "\n]}\n";
    CHECK(capture::raw_trace_complete(plain));
    std::ofstream(plain, std::ios::trunc) << "{\"traceEvents\": [\n" << window_end << ",\n{\"args\": {\"a\": [1]\n  }";
    CHECK_FALSE(capture::raw_trace_complete(plain));
}

TEST_CASE("capture traces: traces streamed from other nodes are read from memory", "[capture][cpu]") {
    auto ranks = captured();
    for (auto& r : ranks) {
        std::ifstream in(r.raw_trace, std::ios::binary);
        r.raw_bytes.assign(std::istreambuf_iterator<char>(in), {});  // gzip, as on disk
        r.raw_trace.clear();
    }
    const std::string out = fresh_dir("capture_memory");
    const capture::CaptureSummary s = capture::finish_capture(ranks, out);
    INFO(s.message);
    CHECK(s.same_steps);
    CHECK(s.steps == 3);
    prof::TraceStore store;
    prof::load_run({out}, store);
    CHECK(store.ranks().size() == 2);
    fs::remove_all(out);
    ranks[1].raw_bytes = "{\"traceEvents\": [";  // cut short
    CHECK_THROWS_WITH(capture::finish_capture(ranks, out), Catch::Contains("the trace of rank 1 (pid"));
    CHECK(folder_empty(out));
}
