// A snapshot's categories over time and the re-sampling of a window (profiler/snapshot/snapshot_series.h), checked
// against the analysis of the same snapshot: at every entry the categories add up to the allocated bytes, the
// window's samples keep the peak, and at the peak the categories are the analysis' categories of the live set.
#include <string>

#include "app/report/snapshot_report.h"
#include "catch_compat.h"
#include "profiler/snapshot/snapshot_series.h"

using namespace us::snap;

namespace {
const std::string dir = std::string(US_TEST_DATA_DIR) + "/snapshot/";

int64_t total(const CategoryBytes& c) {
    int64_t t = 0;
    for (int64_t v : c) t += v;
    return t;
}
}  // namespace

TEST_CASE("snapshot categories over time add up to the allocated bytes and match the peak's live set", "[snapshot]") {
    const MemorySnapshot snap = load_memory_snapshot(dir + "rank0_memory_snapshot.pickle");
    const SnapshotAnalysis a = analyze_snapshot(snap);
    REQUIRE(!a.devices.empty());
    const DeviceMemory& m = a.devices[0];
    REQUIRE(m.has_trace);
    const SnapshotSeries s = build_series(snap, m);
    REQUIRE(s.size() == m.trace_entries);
    CHECK(total(s.start) == m.start_allocated);
    // One sample per entry: every entry's state, its categories summing to its allocated bytes.
    const auto all = sample_window(s, 0, s.size(), s.size() + 10);
    REQUIRE(all.size() == s.size());
    int64_t peak = 0;
    size_t peak_entry = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        CHECK(all[i].first_entry == i);
        CHECK(all[i].allocated == s.allocated[i]);
        CHECK(total(all[i].by_category) == all[i].allocated);
        if (all[i].allocated > peak) peak = all[i].allocated, peak_entry = i;
    }
    CHECK(peak == m.peak_allocated);
    CHECK(int64_t(peak_entry) == m.peak_entry);
    // At the peak, the analysis' categories of the live set.
    for (const CategoryTotal& c : m.categories) {
        INFO(category_name(c.category));
        CHECK(all[peak_entry].by_category[size_t(c.category)] == c.bytes);
    }
    // Zoomed out: fewer samples, each the largest of its slice; the peak is never lost.
    const auto few = sample_window(s, 0, s.size(), 4);
    REQUIRE(few.size() == std::min<size_t>(4, s.size()));
    int64_t few_peak = 0;
    for (const auto& x : few) few_peak = std::max(few_peak, x.allocated);
    CHECK(few_peak == m.peak_allocated);
    CHECK(few.back().last_entry == s.size() - 1);
    // A window inside: it starts from the state before it (checkpoints), the same as the full replay there.
    if (s.size() > 4) {
        const size_t e0 = s.size() / 2, e1 = s.size() - 1;
        const auto part = sample_window(s, e0, e1, 1000);
        REQUIRE(part.size() == e1 - e0);
        for (size_t i = 0; i < part.size(); ++i) CHECK(part[i].by_category == all[e0 + i].by_category);
    }
    CHECK(sample_window(s, 5, 5, 10).empty());
    CHECK(sample_window(s, 0, s.size() + 100, 10).back().last_entry == s.size() - 1);
}

TEST_CASE("snapshot report: each category's own peak and the categories over time, labelled inferred", "[snapshot]") {
    const RankSnapshot r = load_rank_snapshots({dir + "rank0_memory_snapshot.pickle"}).at(0);
    const DeviceMemory& m = r.analysis.devices.at(0);
    const CategoryBytes own = category_peaks(build_series(*r.snapshot, m));
    for (const CategoryTotal& c : m.categories)
        CHECK(own[size_t(c.category)] >= c.bytes);  // a peak is at least the peak's share
    // The fixture's optimizer state is made after the peak (tests/tools/make_snapshot_fixtures.py): 4 MiB, absent at
    // the peak.
    CHECK(own[size_t(MemoryCategory::optimizer_state)] == 4 * 1024 * 1024);
    const auto j = us::app::snapshot_report_json({r});
    const auto& over = j["memory_snapshot"]["ranks"][0]["devices"][0]["categories_over_time"];
    CHECK(over["basis"].get<std::string>().find("inferred") == 0);
    REQUIRE(over["samples"].size() == m.timeline.size());
    for (size_t i = 0; i < m.timeline.size(); ++i) {
        int64_t sum = 0;
        for (const auto& [name, bytes] : over["samples"][i]["by_category"].items()) sum += bytes.get<int64_t>();
        CHECK(sum == over["samples"][i]["allocated_bytes"].get<int64_t>());
        CHECK(over["samples"][i]["allocated_bytes"].get<int64_t>() == m.timeline[i].allocated);
    }
}
