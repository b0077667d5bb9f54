// A run's rank files reduced to digests (profiler/runs/run_digests.h): the same digests as the whole run's store
// gives, a cache that serves the second open and notices a changed file, a damaged file named while the others are
// digested, files split among workers without overlap, and digests far smaller than their traces.
#include <catch2/catch.hpp>
#include <filesystem>

#include "profiler/analysis/rank_digest.h"
#include "profiler/import/run_files.h"
#include "profiler/runs/run_digests.h"
#include "test_util.h"

using namespace us::prof;
namespace fs = std::filesystem;

namespace {

nlohmann::json without_file(const RankDigest& d) {
    nlohmann::json j = digest_json(d);
    j.erase("file"), j.erase("file_bytes"), j.erase("file_mtime_ns");
    return j;
}

}  // namespace

TEST_CASE("digest_run gives the digests the whole run's store gives, and caches them beside the traces", "[cpu]") {
    const std::string dir = us::test::copy_kineto_run("pipeline_1f1b", "digests-1f1b");
    TraceStore store;
    load_run({dir}, store);
    DigestOptions options;
    options.threads = 2;
    const RunDigests first = digest_run({dir}, options);
    REQUIRE(first.errors.empty());
    REQUIRE(first.ranks.size() == 2);
    CHECK(first.made == 2);
    CHECK(first.from_cache == 0);
    for (const RankDigest& d : first.ranks) {
        CHECK(without_file(d) == without_file(make_digest(store, d.rank)));
        CHECK(fs::exists(digest_cache_path(d.file, "")));
        CHECK(fs::path(digest_cache_path(d.file, "")).parent_path().filename() == ".ultrascope-digests");
    }
    // a digest is a small part of its (compressed) trace
    CHECK(first.digest_bytes * 10 < first.trace_bytes);

    const RunDigests second = digest_run({dir}, options);
    CHECK(second.from_cache == 2);
    CHECK(second.made == 0);
    for (size_t i = 0; i < 2; ++i) CHECK(digest_json(second.ranks[i]) == digest_json(first.ranks[i]));

    // a trace written again is digested again
    const std::string changed = first.ranks[1].file;
    fs::last_write_time(changed, fs::last_write_time(changed) + std::chrono::seconds(5));
    const RunDigests third = digest_run({dir}, options);
    CHECK(third.from_cache == 1);
    CHECK(third.made == 1);

    // without the cache nothing is read or written
    fs::remove_all(fs::path(dir) / ".ultrascope-digests");
    options.use_cache = false;
    const RunDigests uncached = digest_run({dir}, options);
    CHECK(uncached.made == 2);
    CHECK_FALSE(fs::exists(fs::path(dir) / ".ultrascope-digests"));
}

TEST_CASE("digest_run names a damaged file and digests the others, and makes a damaged cache again", "[cpu]") {
    const std::string dir = us::test::copy_kineto_run("blame/ddp_no_culprit", "digests-damaged");
    const std::string bad = dir + "/rank-3.json.gz";
    const std::string bytes = us::test::read_file(bad);
    us::test::write_file(bad, bytes.substr(0, bytes.size() / 2));  // cut off mid-file
    DigestOptions options;
    options.threads = 2;
    const RunDigests run = digest_run({dir}, options);
    REQUIRE(run.errors.size() == 1);
    CHECK(run.errors[0].find("rank-3.json.gz") != std::string::npos);
    REQUIRE(run.ranks.size() == 3);
    CHECK(run.ranks[0].rank == 0);
    CHECK(run.ranks[2].rank == 2);

    // a cached digest overwritten with garbage is not trusted
    const std::string cache = digest_cache_path(run.ranks[0].file, "");
    us::test::write_file(cache, "USDIGEST garbage");
    const RunDigests again = digest_run({dir}, options);
    CHECK(again.made == 1);  // rank 0 made again (rank 3 still fails, ranks 1 and 2 from the cache)
    CHECK(again.from_cache == 2);
    CHECK(digest_json(again.ranks[0]) == digest_json(run.ranks[0]));
}

TEST_CASE("digest_run names a file that repeats a rank and one from another run, and analyses the rest", "[cpu]") {
    const std::string dir = us::test::copy_kineto_run("blame/ddp_no_culprit", "digests-strays");
    const std::string data = std::string(US_TEST_DATA_DIR) + "/kineto/blame/";
    fs::copy_file(data + "ddp_no_culprit/rank-1.json.gz", dir + "/rank-1-again.json.gz");  // rank 1 twice
    fs::copy_file(data + "ddp_slow_rank_8/rank-5.json.gz", dir + "/rank-5.json.gz");       // an 8-rank run's rank 5
    DigestOptions options;
    options.use_cache = false;
    const RunDigests run = digest_run({dir}, options);
    INFO(nlohmann::json(run.errors).dump(1));
    REQUIRE(run.errors.size() == 2);
    const std::string errors = nlohmann::json(run.errors).dump();
    CHECK(errors.find("rank-5.json.gz") != std::string::npos);
    CHECK(errors.find("another run") != std::string::npos);
    CHECK(errors.find("rank 1") != std::string::npos);  // the repeated rank is named
    REQUIRE(run.ranks.size() == 4);
    for (int r = 0; r < 4; ++r) CHECK(run.ranks[size_t(r)].rank == r);
}

TEST_CASE("digest_run splits a run's files among workers, each file to one", "[cpu]") {
    const std::string dir = us::test::copy_kineto_run("blame/ddp_no_culprit", "digests-split");
    DigestOptions options;
    options.use_cache = false;
    options.threads = 1;
    const RunDigests a = digest_run({dir}, options, 0, 3), b = digest_run({dir}, options, 1, 3),
                     c = digest_run({dir}, options, 2, 3);
    std::vector<int> ranks;
    for (const RunDigests* part : {&a, &b, &c})
        for (const RankDigest& d : part->ranks) ranks.push_back(d.rank);
    std::sort(ranks.begin(), ranks.end());
    CHECK(ranks == std::vector<int>{0, 1, 2, 3});
    CHECK(a.ranks.size() == 2);
    CHECK(b.ranks.size() == 1);
}
