// The Hang view's model (app/gui/model/hang_model.h, hang_entries.h) on hung jobs made in memory (flight_job.h):
// thousands of ranks fold into a few bands, each cell is the state a dump records (or its absence), the first
// divergence is a column, the groups are offered hung roots first, and a rank's entries read newest first.
#include <catch2/catch.hpp>

#include <algorithm>

#include "app/gui/model/hang_entries.h"
#include "app/gui/model/hang_model.h"
#include "flight_job.h"
#include "profiler/hang/hang_analysis.h"

using namespace us;
using namespace us::gui;
using us::test::FlightJob;

namespace {

std::vector<int> ranks_upto(int n) {
    std::vector<int> r;
    for (int i = 0; i < n; ++i) r.push_back(i);
    return r;
}

// `world` ranks in one group: 41 all-reduces complete, then all but `culprit` enter #42 and wait.
FlightJob one_rank_stops(int world, int culprit) {
    FlightJob job(world);
    const std::vector<int> all = ranks_upto(world);
    job.config("0", "default_pg", all);
    for (int step = 0; step < 41; ++step) job.collective("0", "default_pg", all, "nccl:all_reduce", 1024);
    std::vector<int> waiting;
    for (int r : all)
        if (r != culprit) waiting.push_back(r);
    job.collective("0", "default_pg", waiting, "nccl:all_reduce", 1024, waiting);
    return job;
}

const HangBand& band_of(const HangGrid& g, int rank) {
    for (const HangBand& b : g.bands)
        if (std::binary_search(b.ranks.begin(), b.ranks.end(), rank)) return b;
    FAIL("rank " << rank << " in no band");
    return g.bands.front();
}

size_t band_index(const HangGrid& g, int rank) { return size_t(&band_of(g, rank) - g.bands.data()); }

}  // namespace

TEST_CASE("hang view: 4,096 ranks with one culprit and one missing dump fold into three bands", "[cpu][viewmodel]") {
    FlightJob job = one_rank_stops(4096, 1234);
    job.dumps.erase(job.dumps.begin() + 4000);  // rank 4000 left no dump
    const hang::DumpSet set = hang::check_dumps(std::move(job.dumps));
    const hang::HangAnalysis a = hang::analyze_hang(set);
    REQUIRE(a.group >= 0);
    const HangGrid g = build_hang_grid(a, set, a.group);
    CHECK(g.members == 4096);
    REQUIRE(g.bands.size() == 3);
    // the columns: the last 12 collectives, ending at the one where the group diverged
    REQUIRE(g.seqs.size() == 12);
    CHECK(g.seqs.front() == 31);
    CHECK(g.seqs.back() == 42);
    CHECK(g.divergence == 11);
    CHECK(g.ops[11] == "all_reduce");

    const HangBand& rest = band_of(g, 0);
    CHECK(rest.ranks.size() == 4094);
    CHECK(rest.label == "ranks 0-1233, 1235-3999, 4001-4095 (4094)");
    CHECK(rest.progress == "completed through #41, waiting in #42");
    CHECK_FALSE(rest.culprit);
    CHECK(g.at(band_index(g, 0), 10) == HangCell::completed);
    CHECK(g.at(band_index(g, 0), 11) == HangCell::started);

    const HangBand& culprit = band_of(g, 1234);
    CHECK(culprit.label == "rank 1234");
    CHECK(culprit.culprit);
    CHECK(culprit.progress == "completed through #41");
    CHECK(g.at(band_index(g, 1234), 10) == HangCell::completed);
    CHECK(g.at(band_index(g, 1234), 11) == HangCell::absent);  // never entered #42

    const HangBand& absent = band_of(g, 4000);
    CHECK(absent.absent);
    CHECK(absent.progress == "no dump");
    for (size_t c = 0; c < g.seqs.size(); ++c) CHECK(g.at(band_index(g, 4000), c) == HangCell::absent);
}

TEST_CASE("hang view: a cell is the state the dump records: completed, retired, started, only scheduled, not held",
          "[cpu][viewmodel]") {
    FlightJob job(4);
    job.config("0", "default_pg", {0, 1, 2, 3});
    for (int step = 0; step < 6; ++step) job.collective("0", "default_pg", {0, 1, 2, 3}, "gloo:all_reduce", 64);
    job.collective("0", "default_pg", {0, 1, 2, 3}, "gloo:all_reduce", 64, {0, 1, 2, 3});
    // rank 1: gloo's way: every entry "scheduled", the finished ones retired, the last one not
    for (flight::FlightEntry& e : job.dumps[1].entries) e.state = flight::EntryState::scheduled;
    // rank 2's ring wrapped: it holds #4 on only
    auto& wrapped = job.dumps[2].entries;
    wrapped.erase(wrapped.begin(), wrapped.begin() + 3);
    const hang::DumpSet set = hang::check_dumps(std::move(job.dumps));
    const hang::HangAnalysis a = hang::analyze_hang(set);
    const HangGrid g = build_hang_grid(a, set, default_hang_group(a));
    REQUIRE(g.seqs == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7});
    const size_t r0 = band_index(g, 0), r1 = band_index(g, 1), r2 = band_index(g, 2);
    CHECK(r0 == band_index(g, 3));  // ranks 0 and 3 look alike
    CHECK(g.at(r0, 0) == HangCell::completed);
    CHECK(g.at(r0, 6) == HangCell::started);
    CHECK(g.at(r1, 5) == HangCell::completed);  // retired
    CHECK(g.at(r1, 6) == HangCell::scheduled);  // only scheduled: gloo says no more
    CHECK(g.at(r2, 0) == HangCell::not_held);   // wrapped away: says nothing
    CHECK(g.at(r2, 2) == HangCell::not_held);
    CHECK(g.at(r2, 3) == HangCell::completed);
    CHECK(g.bands.size() == 3);
}

TEST_CASE("hang view: a mismatch outlines the collective called differently and marks who called it",
          "[cpu][viewmodel]") {
    FlightJob job(4);
    job.config("0", "default_pg", {0, 1, 2, 3});
    for (int step = 0; step < 4; ++step) job.collective("0", "default_pg", {0, 1, 2, 3}, "nccl:all_reduce", 1024);
    job.collective_on(3, "0", "default_pg", "nccl:all_reduce", 2048, false, 5, 77);
    for (int r : {0, 1, 2}) job.collective_on(r, "0", "default_pg", "nccl:all_reduce", 1024, false, 5);
    const hang::DumpSet set = hang::check_dumps(std::move(job.dumps));
    const hang::HangAnalysis a = hang::analyze_hang(set);
    REQUIRE(a.kind == hang::HangKind::mismatch);
    const HangGrid g = build_hang_grid(a, set, a.group);
    REQUIRE(g.divergence >= 0);
    CHECK(g.seqs[size_t(g.divergence)] == 5);
    CHECK(g.bands.size() == 2);
    CHECK(band_of(g, 3).culprit);
    CHECK_FALSE(band_of(g, 0).culprit);
    const auto call = hang_call_at(a, set, a.group, 3, 5);
    REQUIRE(call);
    CHECK(call->input_sizes == std::vector<std::vector<int64_t>>{{2048}});
    CHECK_FALSE(hang_call_at(a, set, a.group, 3, 99));
}

TEST_CASE("hang view: the groups are offered hung roots first, then their victims, then the groups that agree",
          "[cpu][viewmodel]") {
    // dp 2 x tp 4 (test_hang_analysis.cpp's job): rank 3 stops inside t0; t1's ranks wait in dp
    FlightJob job(8);
    const std::vector<std::vector<int>> tp = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    for (int step = 0; step < 3; ++step) {
        for (int t = 0; t < 2; ++t)
            job.collective("t" + std::to_string(t), "tp", tp[size_t(t)], "nccl:all_reduce", 512);
        for (int d = 0; d < 4; ++d) job.collective("d" + std::to_string(d), "dp", {d, d + 4}, "nccl:all_reduce", 4096);
    }
    job.collective("t0", "tp", {0, 1, 2}, "nccl:all_reduce", 512, {0, 1, 2});
    job.collective("t1", "tp", {4, 5, 6, 7}, "nccl:all_reduce", 512);
    for (int d = 0; d < 4; ++d)
        job.collective_on(d + 4, "d" + std::to_string(d), "dp", "nccl:all_reduce", 4096, false, 4);
    const hang::DumpSet set = hang::check_dumps(std::move(job.dumps));
    const hang::HangAnalysis a = hang::analyze_hang(set);
    const std::vector<HangGroupChoice> choices = hang_group_choices(a);
    REQUIRE(choices.size() == a.groups.size());
    CHECK(a.groups[size_t(choices[0].group)].name == "t0");
    CHECK(choices[0].label == "group 't0' (tp), 4 ranks: members missing, the root");
    CHECK(default_hang_group(a) == choices[0].group);
    // roots, then victims, then the groups that agree (rank 3 also never entered d3, after it stopped in t0: the
    // same culprit missing earlier makes d3 a victim too, so one root)
    int last_role = 0, victims = 0;
    for (const HangGroupChoice& c : choices) {
        const hang::GroupState& g = a.groups[size_t(c.group)];
        const int role = g.kind == hang::HangKind::none ? 2 : g.held_by >= 0 ? 1 : 0;
        CHECK(role >= last_role);
        last_role = role;
        if (role == 1) {
            ++victims;
            CHECK(c.label.find("held by group 't0' (tp)") != std::string::npos);
        }
    }
    CHECK(victims == 4);
    CHECK(choices.back().label.find(": agrees") != std::string::npos);
    // the root's grid: rank 3 marked, the others waiting in #4
    const HangGrid g = build_hang_grid(a, set, choices[0].group);
    CHECK(band_of(g, 3).culprit);
    CHECK(band_of(g, 0).progress == "completed through #3, waiting in #4");
    CHECK(g.seqs.back() == 4);
}

TEST_CASE("hang view: ranks read as ranges, a band as its ranks and their count", "[cpu][viewmodel]") {
    CHECK(rank_ranges({0, 1, 2, 5, 7, 8}) == "0-2, 5, 7-8");
    CHECK(rank_ranges({1, 3, 5, 7, 9, 11}, 4) == "1, 3, 5, 7, ...");
    CHECK(band_label({7}) == "rank 7");
    CHECK(band_label({0, 1, 2, 3}) == "ranks 0-3 (4)");
}

TEST_CASE("hang view: a clicked rank's entries read newest first, the group's and its divergence marked",
          "[cpu][viewmodel]") {
    FlightJob job = one_rank_stops(4, 2);
    job.collective("1", "pp", {0, 1}, "nccl:broadcast", 8);  // another group, after
    const hang::DumpSet set = hang::check_dumps(std::move(job.dumps));
    const hang::HangAnalysis a = hang::analyze_hang(set);
    int g0 = -1;
    for (size_t i = 0; i < a.groups.size(); ++i)
        if (a.groups[i].name == "0") g0 = int(i);
    REQUIRE(g0 >= 0);
    const std::vector<HangEntryRow> rows = hang_rank_entries(a, set, 0, g0);
    REQUIRE(rows.size() == 43);
    CHECK(rows[0].op == "nccl:broadcast");  // newest first
    CHECK(rows[0].group == "1 (pp)");
    CHECK_FALSE(rows[0].in_group);
    CHECK(rows[1].seq == "#42");
    CHECK(rows[1].in_group);
    CHECK(rows[1].divergence);
    CHECK(rows[1].state == "started");
    CHECK(rows[1].sizes == "[1024] -> [1024]");
    CHECK(rows[1].dtypes == "Float -> Float");
    CHECK(rows[2].state == "completed, retired");
    CHECK_FALSE(rows[2].divergence);
    CHECK(rows.back().record_id == 0);
    CHECK(rows.back().created == "+0.000 s");
    CHECK(hang_rank_entries(a, set, 99, g0).empty());  // no such rank
}
