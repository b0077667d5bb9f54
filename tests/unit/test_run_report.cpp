// One report builder (app/report/run_report.h): the same document from the trace files, from a store already held
// (a live run, a lesson's run, the GUI) and, for a large run, from its digests.
#include <catch2/catch.hpp>

#include "app/report/run_report.h"
#include "profiler/import/run_files.h"

using namespace us;

namespace {
const std::string kEngineTrace = std::string(US_TEST_DATA_DIR) + "/cpu/afab-pp1-tp2-tiny.ustrace";
const std::string kKinetoRun = std::string(US_TEST_DATA_DIR) + "/kineto/blame/ddp_slow_rank_8";
}  // namespace

TEST_CASE("run report: one document from the files or from a store already held", "[cpu][app][report]") {
    const app::RunReport from_files = app::make_run_report(app::ReportSource::of_files({kEngineTrace}), {});
    REQUIRE(from_files.whole);
    CHECK_FALSE(from_files.digests);
    prof::TraceStore store;
    prof::load_run({kEngineTrace}, store);
    const app::RunReport from_store = app::make_run_report(app::ReportSource::of_store(store, kEngineTrace), {});
    CHECK(app::format_run_report(from_store) == app::format_run_report(from_files));
    CHECK(app::run_report_json(from_store) == app::run_report_json(from_files));
    // the document, not the analysis alone: who holds the run back first, the run, the planner beside it
    const std::string text = app::format_run_report(from_files);
    CHECK(text.find("Who holds the run back") < text.find("Throughput"));
    const nlohmann::json j = app::run_report_json(from_files);
    CHECK(j.contains("run"));
    CHECK(j.contains("planner"));
    CHECK(app::run_report_exit_code(from_files) == 0);
}

TEST_CASE("run report: --digests reports from the digests, --rank opens the ranks asked for whole",
          "[cpu][app][report][blame]") {
    app::ReportOptions digests;
    digests.digests_only = true, digests.no_cache = true;
    const app::RunReport d = app::make_run_report(app::ReportSource::of_files({kKinetoRun}), digests);
    REQUIRE(d.digests);
    CHECK(d.digests->cross.digests.size() == 8);
    for (const auto& rank : prof::digest_report_json(*d.digests)["ranks"]) CHECK(rank["host"] == "vm");
    app::ReportOptions one_rank;
    one_rank.ranks = {3}, one_rank.no_cache = true;
    const app::RunReport r = app::make_run_report(app::ReportSource::of_files({kKinetoRun}), one_rank);
    REQUIRE(r.whole);
    REQUIRE(r.whole->ranks.size() == 1);
    CHECK(r.whole->ranks[0].rank == 3);
    // the MPI worker's path: the digests gathered, then the rank asked for whole
    prof::DigestOptions no_cache;
    no_cache.use_cache = false;
    const app::RunReport gathered = app::make_run_report(
        app::ReportSource::of_digests(prof::digest_run({kKinetoRun}, no_cache), {kKinetoRun}, 2), one_rank);
    REQUIRE(gathered.whole);
    CHECK(gathered.whole->ranks[0].rank == 3);
    CHECK(app::format_run_report(gathered) == app::format_run_report(r));
}
