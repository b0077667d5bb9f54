// The memory profiler's categories over time (prof.export_memory_timeline) of the committed DDP run
// (tests/data/kineto/ddp, torch 2.15.0, CPU, rank 0): read exactly, hostile text refused naming the file, and how
// often our categories inferred from the ops around each [memory] event agree with the measured ones.
#include <string>

#include "catch_compat.h"
#include "common/core/check.h"
#include "profiler/import/kineto_memory_ops.h"
#include "profiler/import/memory_category_agreement.h"
#include "profiler/import/memory_timeline.h"
#include "profiler/import/run_files.h"
#include "profiler/analysis/imported_report.h"
#include "profiler/import/memory_categories.h"
#include "profiler/import/kineto_parse.h"

using namespace us;
using namespace us::prof;

namespace {

const std::string ddp = std::string(US_TEST_DATA_DIR) + "/kineto/ddp/";
const std::string timeline_file = ddp + "memory_timeline_rank0.json.gz";
const std::string rank0_trace = ddp + "vm_20223.1795526751102024081.pt.trace.json.gz";

std::string refusal(const std::string& text) {
    try {
        (void)parse_memory_timeline(text, "bad_timeline.json");
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("the DDP run's memory timeline reads as torch wrote it", "[memtimeline]") {
    const MemoryTimeline t = load_memory_timeline(timeline_file);
    CHECK(t.rank == 0);
    REQUIRE(t.size() == 2647);  // python: len(json.load(gzip.open(f))[0])
    CHECK(t.bytes.size() == t.size() * kProfilerCategories);
    CHECK(t.times_us.front() == 1795526750705112);
    CHECK(t.times_us.back() == 1795526750850824);
    // Before profiling: the parameters, AdamW's two moments and DDP's gradient buckets (the profiler: unknown).
    CHECK(t.at(0, ProfilerCategory::parameter) == 548864);
    CHECK(t.at(0, ProfilerCategory::optimizer_state) == 1097880);
    CHECK(t.at(0, ProfilerCategory::unknown) == 548864);
    const TimelinePeaks p = timeline_peaks(t);
    CHECK(p.total_peak_bytes == 8266464);
    CHECK(p.total_peak_time_us == 1795526750721421);
    CHECK(p.at_total_peak[size_t(ProfilerCategory::activation)] == 5017608);
    CHECK(p.at_total_peak[size_t(ProfilerCategory::autograd_detail)] == 1048576);
    CHECK(p.peak_bytes[size_t(ProfilerCategory::activation)] == 5541896);
    CHECK(p.peak_bytes[size_t(ProfilerCategory::gradient)] == 548864);
}

TEST_CASE("a folder with a memory timeline: the timeline is found and is not taken for a trace", "[memtimeline]") {
    CHECK(find_memory_timelines({ddp}) == std::vector<std::string>{timeline_file});
    CHECK(find_memory_timelines({rank0_trace, timeline_file}) == std::vector<std::string>{timeline_file});
    const RunFiles run = find_run_files({ddp});
    CHECK(run.files.size() == 2);
    for (const auto& w : run.warnings) CHECK(w.find("memory_timeline") == std::string::npos);
    CHECK(find_run_files({rank0_trace, timeline_file}).files == std::vector<std::string>{rank0_trace});
    CHECK_THROWS_AS(find_run_files({timeline_file}), UserError);
}

TEST_CASE("hostile or damaged memory timelines are refused with the file and the place", "[memtimeline][fuzz]") {
    CHECK(refusal("[[1,2],[[0,1,2,3,4,5,6,7,8],[0,1,2,3,4,5,6,7,8]]]").empty());
    const std::pair<const char*, const char*> cases[] = {
        {"", "cut short"},
        {"{\"traceEvents\": []}", "expected '['"},
        {"[[1,2],[[0,1,2,3,4,5,6,7,8]]]", "2 times but 1 rows"},
        {"[[1],[[0,1,2,3]]]", "has 4 columns, expected 9"},
        {"[[1],[[0,1,2,3,4,5,6,7,8]]", "cut short"},
        {"[[1.5],[[0,1,2,3,4,5,6,7,8]]]", "whole number"},
        {"[[99999999999999999999],[[0,1,2,3,4,5,6,7,8]]]", "out of range"},
        {"[[2,1],[[0,1,2,3,4,5,6,7,8],[0,1,2,3,4,5,6,7,8]]]", "in order"},
        {"[[],[]]", "empty"},
        {"[[1],[[0,1,2,3,4,5,6,7,8]]] x", "after the export"},
        {"[[1],[[0,\"a\",2,3,4,5,6,7,8]]]", "whole number"},
    };
    for (const auto& [text, says] : cases) {
        const std::string why = refusal(text);
        INFO(text << " -> " << why);
        CHECK(why.find("bad_timeline.json") != std::string::npos);
        CHECK(why.find(says) != std::string::npos);
    }
    // Deep nesting and long inputs cost nothing: the parser never recurses, and a row has exactly 9 numbers.
    CHECK(refusal(std::string(100000, '[')).find("whole number") != std::string::npos);
    std::string wide = "[[1],[[0";
    for (int i = 0; i < 100000; ++i) wide += ",1";
    CHECK(refusal(wide + "]]]").find("columns") != std::string::npos);
    // Every prefix of a valid export is refused (or, for the whole, read), never a crash.
    const std::string valid = "[[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 9, 8, 7, 6, 5, 4, 3, 2]]]";
    for (size_t n = 0; n < valid.size(); ++n) CHECK_FALSE(refusal(valid.substr(0, n)).empty());
    CHECK_THROWS_AS(load_memory_timeline(ddp + "no_such_memory_timeline.json"), UserError);
}

TEST_CASE("categories inferred from the ops agree with the memory profiler's on the DDP run", "[memtimeline]") {
    // kept by the reader's one pass over the file (kineto_parse.h), categories inferred from the ops around them
    const KinetoMemoryEvents events = memory_events_of(parse_kineto_file(rank0_trace), 0);
    CHECK(events.rank == 0);
    CHECK(events.events.size() == 2648);
    CHECK(events.base_time_ns == 1790857026000000000);
    const MemoryTimeline t = load_memory_timeline(timeline_file);
    // The events and the timeline share the profiler's clock: the first allocation is at the timeline's start.
    CHECK(events.profiler_time_us(events.events.front()) == t.times_us.front());
    const CategoryAgreement grouped = compare_categories(events, t, -1, AgreementGrouping::grouped);
    const CategoryAgreement strict = compare_categories(events, t, -1, AgreementGrouping::strict);
    CHECK(grouped.events_used == 2648);
    // Measured on this run (docs/pytorch-memory.md, "How often inference agrees"): byte-time agreement 0.990
    // grouped (gradient = autograd detail), 0.890 strict; at the measured peak 0.913 grouped, 0.740 strict. The
    // floors sit a little below, so that a change of the rules that loses agreement fails here.
    CHECK(grouped.byte_time >= 0.97);
    CHECK(strict.byte_time >= 0.86);
    CHECK(grouped.at_peak >= 0.89);
    CHECK(strict.at_peak >= 0.70);
    CHECK(grouped.byte_time <= 1.0);
    CHECK(grouped.measured_peak_bytes == 8266464 - (548864 + 1097880 + 548864));  // the peak above the preexisting
    // Per allocation (the timeline's category when it was made, matched by its bytes at its microsecond): of the
    // 23,960,648 bytes matched, 10,092,288 get the same category strictly and 20,971,264 grouped (42% and 88%).
    int64_t matched = 0, same_strict = 0, same_grouped = 0;
    const size_t grad = size_t(ProfilerCategory::gradient), detail = size_t(ProfilerCategory::autograd_detail);
    for (size_t i = 0; i < kProfilerCategories; ++i)
        for (size_t m = 0; m < kProfilerCategories; ++m) {
            matched += strict.allocated[i][m];
            if (m == i) same_strict += strict.allocated[i][m];
            if (m == i || (i == grad && m == detail)) same_grouped += strict.allocated[i][m];
        }
    CHECK(matched == 23960648);
    CHECK(same_strict == 10092288);
    CHECK(same_grouped == 20971264);
}

TEST_CASE("report: the memory profiler's categories per rank beside the DDP run, placed on the trace's clock",
          "[memtimeline]") {
    prof::TraceStore store;
    std::vector<KinetoMemoryEvents> memory;  // as the loader kept them: no second read of the files
    (void)load_run({ddp}, store, &memory);
    REQUIRE(memory.size() == 2);
    const RunInfo run = run_info_of(store);
    const auto ranks = load_memory_categories({ddp}, store, run, memory);
    REQUIRE(ranks.size() == 2);  // rank 0 measured (and inferred), rank 1 inferred only
    const auto& r = ranks[0];
    CHECK(r.rank == 0);
    CHECK(r.measured);
    CHECK_FALSE(ranks[1].measured);
    CHECK(ranks[1].rank == 1);
    REQUIRE(ranks[1].inferred.has_value());
    // Inferred, the bytes allocated since profiling began add up to what the allocator reported ([memory] events'
    // Total Allocated, the store's counter): the categories split the total, they do not change it.
    const double counted_peak = imported_memory_json(store)["1"]["kineto_cpu_allocated_bytes_peak"];
    CHECK(ranks[1].inferred_peaks.total_peak_bytes == int64_t(counted_peak));
    CHECK(r.inferred_peaks.total_peak_bytes ==
          int64_t(imported_memory_json(store)["0"]["kineto_cpu_allocated_bytes_peak"].get<double>()));
    REQUIRE(r.device.has_value());
    CHECK(*r.device == -1);  // the export was of device='cpu'
    // The first [memory] event of rank 0 at its ts (ns), the timeline's first event one microsecond-truncation apart.
    REQUIRE(r.offset_ns.has_value());
    CHECK(r.store_time(r.timeline.times_us[1]).value() <= 4669724705112871);
    CHECK(r.store_time(r.timeline.times_us[1]).value() > 4669724705112871 - 1000);
    REQUIRE(r.grouped.has_value());
    CHECK(r.grouped->byte_time >= 0.97);
    const nlohmann::json j = memory_categories_json(ranks);
    CHECK(j["ranks"][0]["basis"] == "measured");
    CHECK(j["ranks"][1]["basis"] == "inferred");
    CHECK(j["ranks"][1]["categories"]["activation"]["peak_bytes"] > 0);
    CHECK(j["ranks"][0]["categories"]["activation"]["bytes_at_total_peak"] == 5017608);
    CHECK(j["ranks"][0]["total_peak_bytes"] == 8266464);
    CHECK(j["ranks"][0]["device"] == "host memory");
    const std::string text = format_memory_categories(ranks);
    CHECK(text.find("measured by the memory profiler") != std::string::npos);
    CHECK(text.find("activations") != std::string::npos);
    CHECK(text.find("INFERRED") != std::string::npos);
    // Without a timeline beside it, the run has no measured categories (not zeros: nothing), inferred ones only.
    for (const auto& x : load_memory_categories({rank0_trace}, store, run, memory)) CHECK_FALSE(x.measured);
    CHECK(load_memory_categories({rank0_trace}, store, run, {}).empty());
}
