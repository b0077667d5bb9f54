// Opening a run a rank at a time (profiler/import/progressive_load.h), as the GUI does: the ranks arrive in the
// shown store while the others are still read, the result equals load_run's, a cancel stops the workers mid-file,
// and a damaged file mid-load is named while the other ranks stay usable. Also TraceStore::merge on its own.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "profiler/analysis/report.h"
#include "profiler/import/progressive_load.h"
#include "profiler/import/run_files.h"
#include "kineto_synthetic.h"
#include "test_util.h"

using namespace us::prof;
namespace fs = std::filesystem;

namespace {

// A folder of its own under the test's temporary folder, removed afterwards.
class TempDir {
public:
    TempDir() {
        static int n = 0;
        m_path = fs::temp_directory_path() /
                 ("ultrascope-progressive-" + std::to_string(::getpid()) + "-" + std::to_string(++n));
        fs::remove_all(m_path);
        fs::create_directories(m_path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(m_path, ec);
    }
    std::string path() const { return m_path.string(); }

private:
    fs::path m_path;
};

const std::string kRun = std::string(US_TEST_DATA_DIR) + "/kineto/dp2_tp2/iteration_4";

std::string rank_file(int r) { return kRun + "/rank" + std::to_string(r) + "_trace.json.gz"; }

// Takes what the load finished until it has finished (at most 60 s).
void drain(ProgressiveLoad& load, TraceStore& store) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!load.finished() && std::chrono::steady_clock::now() < give_up) {
        load.take_ready(store);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    load.take_ready(store);
}

// Each span of each lane of each rank, by name: what a view draws.
std::vector<std::string> span_names(const TraceStore& s) {
    std::vector<std::string> out;
    for (int r : s.ranks())
        for (const LaneTrack& lane : s.rank(r)->lanes)
            for (const Span& sp : lane.spans())
                out.push_back(s.name(sp.name) + "|" + s.name(sp.launcher) + "|" + std::to_string(sp.begin) + "|" +
                              std::to_string(sp.row));
    return out;
}

}  // namespace

TEST_CASE("progressive load: a run read a rank at a time equals load_run's, report included", "[kineto][progressive]") {
    TraceStore whole;
    const auto warnings = load_run({kRun}, whole);
    for (int threads : {1, 2, 4}) {
        ProgressiveLoad load({kRun}, {}, threads);
        TraceStore shown;
        drain(load, shown);
        const LoadProgress p = load.progress();
        REQUIRE(p.finished);
        CHECK(p.files_total == 4);
        CHECK(p.files_done == 4);
        CHECK(p.files_failed == 0);
        CHECK(p.ranks_shown == 4);
        CHECK(p.bytes_read == p.bytes_total);
        CHECK(load.take_errors().empty());
        CHECK(load.take_warnings().size() == warnings.size());
        CHECK(shown.ranks() == whole.ranks());
        CHECK(shown.span_count() == whole.span_count());
        CHECK(shown.bytes_used() == whole.bytes_used());
        CHECK(span_names(shown) == span_names(whole));
        for (int r : whole.ranks()) CHECK(to_json(shown.rank(r)->info) == to_json(whole.rank(r)->info));
        CHECK(format_report(build_report(shown)) == format_report(build_report(whole)));
    }
}

TEST_CASE("progressive load: the first rank is shown while a large one is still read, then all are",
          "[kineto][progressive]") {
    TempDir dir;
    const std::string big = dir.path() + "/rank1_big.json";
    us::test::write_synthetic_kineto(big, 1, 40);
    ProgressiveLoad load({rank_file(0), big}, {}, 1);  // one worker: the files in the order given
    TraceStore shown;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    size_t taken = 0;
    while (taken == 0 && std::chrono::steady_clock::now() < give_up) {
        taken = load.take_ready(shown);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(taken == 1);
    CHECK(shown.ranks() == std::vector<int>{0});
    const LoadProgress mid = load.progress();
    CHECK_FALSE(mid.finished);  // 40 MB of rank 1 still to read: the view draws rank 0 meanwhile
    CHECK(mid.files_done == 1);
    CHECK(mid.bytes_read < mid.bytes_total);
    drain(load, shown);
    CHECK(load.finished());
    CHECK(shown.ranks() == std::vector<int>{0, 1});
    CHECK(shown.rank(1)->lanes[size_t(Lane::device)].spans().size() > 50000);  // ~100k kernels
}

TEST_CASE("progressive load: a cancel stops the workers mid-file, and what was shown stays", "[kineto][progressive]") {
    TempDir dir;
    const std::string big = dir.path() + "/rank1_big.json";
    us::test::write_synthetic_kineto(big, 1, 60);
    TraceStore shown;
    LoadProgress at_cancel;
    {
        ProgressiveLoad load({rank_file(0), big}, {}, 1);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (shown.rank_count() == 0 && std::chrono::steady_clock::now() < give_up) {
            load.take_ready(shown);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        REQUIRE(shown.ranks() == std::vector<int>{0});
        load.cancel();
        const auto t0 = std::chrono::steady_clock::now();
        while (!load.finished() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        at_cancel = load.progress();
        load.take_ready(shown);
        CHECK(load.take_errors().empty());  // a cancel is not an error
    }                                       // the destructor has joined every worker
    CHECK(at_cancel.finished);
    CHECK(at_cancel.bytes_read < at_cancel.bytes_total);  // stopped inside the 60 MB file
    CHECK(at_cancel.files_done == 1);
    CHECK(shown.ranks() == std::vector<int>{0});
    CHECK(shown.rank(0)->lanes[size_t(Lane::host)].spans().size() > 0);
}

TEST_CASE("progressive load: a damaged file mid-load is named, and the ranks before and after it stay usable",
          "[kineto][progressive][errors]") {
    TempDir dir;
    for (int r : {0, 2, 3}) fs::copy_file(rank_file(r), dir.path() + "/rank" + std::to_string(r) + "_trace.json.gz");
    const std::string cut = dir.path() + "/rank1_trace.json.gz";
    {  // rank 1's file cut in half, as a copy that stopped early
        std::ifstream in(rank_file(1), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream(cut, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() / 2));
    }
    ProgressiveLoad load({dir.path()}, {}, 2);
    TraceStore shown;
    drain(load, shown);
    const LoadProgress p = load.progress();
    CHECK(p.finished);
    CHECK(p.files_total == 4);
    CHECK(p.files_failed == 1);
    CHECK(p.files_done == 4);
    const auto errors = load.take_errors();
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains(cut) && Catch::Contains("cut short"));
    CHECK(shown.ranks() == std::vector<int>{0, 2, 3});
    // The ranks read are whole: the same as each file opened alone.
    TraceStore alone;
    load_run({rank_file(2)}, alone);
    CHECK(shown.rank(2)->lanes[size_t(Lane::host)].spans().size() ==
          alone.rank(2)->lanes[size_t(Lane::host)].spans().size());
    CHECK_FALSE(build_report(shown).ranks.empty());
}

TEST_CASE("progressive load: two files of one rank, and nothing readable, are errors naming the files",
          "[kineto][progressive][errors]") {
    TempDir dir;
    const std::string copy = dir.path() + "/again_rank0.json.gz";
    fs::copy_file(rank_file(0), copy);
    {
        ProgressiveLoad load({rank_file(0), copy}, {}, 1);
        TraceStore shown;
        drain(load, shown);
        const auto errors = load.take_errors();
        REQUIRE(errors.size() == 1);
        CHECK_THAT(errors[0],
                   Catch::Contains(rank_file(0)) && Catch::Contains(copy) && Catch::Contains("both claim rank 0"));
        CHECK(shown.ranks() == std::vector<int>{0});
    }
    {
        ProgressiveLoad load({dir.path() + "/missing"}, {}, 0);
        TraceStore shown;
        drain(load, shown);
        const auto errors = load.take_errors();
        REQUIRE(errors.size() == 1);
        CHECK_THAT(errors[0], Catch::Contains("missing") && Catch::Contains("no such file"));
        CHECK(shown.rank_count() == 0);
        CHECK(load.progress().finished);
    }
}

TEST_CASE("trace store merge: names re-interned, counts added, a rank present twice refused", "[kineto][progressive]") {
    TraceStore a, b, whole;
    load_run({rank_file(0)}, a);
    load_run({rank_file(1)}, b);
    load_run({rank_file(0), rank_file(1)}, whole);
    const size_t spans = a.span_count() + b.span_count();
    TraceStore shown;
    shown.merge(std::move(b));  // rank 1 first: names get other ids than in `whole`
    shown.merge(std::move(a));
    CHECK(b.rank_count() == 0);
    CHECK(shown.span_count() == spans);
    CHECK(span_names(shown) == span_names(whole));
    TraceStore again;
    load_run({rank_file(0)}, again);
    CHECK_THROWS_WITH(shown.merge(std::move(again)), Catch::Contains("rank 0 is in the run twice"));
    CHECK(shown.span_count() == spans);
}

TEST_CASE("progressive load: each rank gets a share of the cap, and a rank over its share says the store is at its cap",
          "[kineto][progressive]") {
    TraceStore whole;
    load_run({kRun}, whole);
    TraceStoreOptions small;
    small.max_bytes = whole.bytes_used() / 2;  // a share of a quarter of that per rank: every rank drops op spans
    ProgressiveLoad load({kRun}, small, 2);
    TraceStore shown(small);
    drain(load, shown);
    CHECK(shown.ranks() == whole.ranks());
    CHECK(shown.bytes_used() <= small.max_bytes + 4 * sizeof(Span) * 65536);  // each rank stops at its share
    CHECK(shown.spans_dropped_by_cap() > 0);
    CHECK(shown.at_cap());
    CHECK(shown.cap_reached_at_step() > 0);
    for (int r : shown.ranks()) CHECK(shown.rank(r)->lanes[size_t(Lane::host)].spans().size() > 0);
    // `report` reads the files through the same rank-file reader, with the same shares: the same spans kept, the
    // same report (rank_file.h)
    TraceStore reported(small);
    load_run({kRun}, reported);
    CHECK(reported.span_count() == shown.span_count());
    CHECK(reported.spans_dropped_by_cap() == shown.spans_dropped_by_cap());
    CHECK(format_report(build_report(reported)) == format_report(build_report(shown)));
}

TEST_CASE("progressive load: the [memory] events come with the ranks, as load_run keeps them",
          "[kineto][progressive]") {
    const std::string ddp = std::string(US_TEST_DATA_DIR) + "/kineto/ddp";
    TraceStore whole;
    std::vector<KinetoMemoryEvents> memory;
    load_run({ddp}, whole, &memory);
    REQUIRE(memory.size() == 2);
    ProgressiveLoad load({ddp}, {}, 2);
    TraceStore shown;
    drain(load, shown);
    std::vector<KinetoMemoryEvents> taken = load.take_memory_events();
    REQUIRE(taken.size() == 2);
    auto by_rank = [](const KinetoMemoryEvents& a, const KinetoMemoryEvents& b) { return a.rank < b.rank; };
    std::sort(memory.begin(), memory.end(), by_rank);
    std::sort(taken.begin(), taken.end(), by_rank);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(taken[i].rank == memory[i].rank);
        REQUIRE(taken[i].events.size() == memory[i].events.size());
        CHECK(taken[i].events.size() > 1000);
        for (size_t e = 0; e < taken[i].events.size(); ++e) {
            CHECK(taken[i].events[e].bytes == memory[i].events[e].bytes);
            CHECK(taken[i].events[e].category == memory[i].events[e].category);
        }
    }
}
