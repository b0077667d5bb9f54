// PyTorch CUDA memory snapshots: the synthetic training step of tests/tools/make_snapshot_fixtures.py, every figure
// worked out by hand (the script's comments show the running totals); protocols 2, 4, 5 and JSON agree; and every
// hostile file is refused with a message naming the file, without a crash.
#include <filesystem>
#include <fstream>
#include <string>

#include "app/report/snapshot_report.h"
#include "catch_compat.h"
#include "test_util.h"
#include "common/core/check.h"
#include "common/core/memory_category.h"
#include "profiler/plain/pickle_reader.h"
#include "profiler/plain/plain_json_reader.h"
#include "profiler/snapshot/snapshot_analysis.h"
#include "profiler/snapshot/snapshot_export.h"
#include "profiler/transport/chunk.h"

using namespace us;
using namespace us::snap;
using namespace us::plain;

namespace {

constexpr int64_t MiB = 1 << 20;
const std::string dir = std::string(US_TEST_DATA_DIR) + "/snapshot/";

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message a file is refused with ("" if it is not refused).
std::string refusal(const std::string& path) {
    try {
        const MemorySnapshot s = load_memory_snapshot(path);
        (void)analyze_snapshot(s);
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

void check_training_step(const std::string& file) {
    INFO(file);
    const MemorySnapshot s = load_memory_snapshot(dir + file);
    REQUIRE(s.segments.size() == 2);
    REQUIRE(s.device_traces.size() == 1);
    REQUIRE(s.trace_entries() == 22);
    const SnapshotAnalysis a = analyze_snapshot(s);
    REQUIRE(a.devices.size() == 1);
    const DeviceMemory& m = a.devices[0];
    // dump time: segments of 8 and 20 MiB; W1 4 + W2 2 + exp_avg 2 + exp_avg_sq 2 allocated; comm 1 awaiting free
    CHECK(m.reserved_bytes == 28 * MiB);
    CHECK(m.allocated_bytes == 10 * MiB);
    CHECK(m.active_bytes == 11 * MiB);
    CHECK(m.segments == 2);
    CHECK(m.largest_free_block_at_dump == 16 * MiB);
    // the trace's net change: +2 -1 +8 +4 +7 -4 -8 +2 +2 -7 +0.5 -0.5 = +5 MiB allocated, +20 +2 -2 = +20 reserved
    CHECK(m.start_known);
    CHECK(m.start_allocated == 6 * MiB);
    CHECK(m.start_reserved == 8 * MiB);
    // the peak: 6 + 2 - 1 + 8 + 4 + 7 = 26 MiB after entry 6 (time 1060), with segments 1 and 2 reserved
    CHECK(m.peak_allocated == 26 * MiB);
    CHECK(m.peak_entry == 6);
    CHECK(m.peak_time_us == 1060);
    CHECK(m.reserved_at_peak == 28 * MiB);
    CHECK(m.peak_reserved == 30 * MiB);
    // fragmentation: 28 - 26 = 2 MiB free in two 1 MiB runs (segment 1 at 4-5 MiB, segment 2 at 19-20 MiB)
    CHECK(m.free_in_segments_at_peak == 2 * MiB);
    CHECK(m.largest_free_block_at_peak == 1 * MiB);
    // alive at the peak, largest first: act1 8, grad 7, then the 4 MiB act2 and W1, W2 2, comm 1
    REQUIRE(m.at_peak.size() == 6);
    CHECK(m.at_peak[0].size == 8 * MiB);
    CHECK(frame_label(s, m.at_peak[0].user_frame) == "model.py:40 in forward");
    CHECK(m.at_peak[0].category == MemoryCategory::activations);
    CHECK(m.at_peak[0].origin == AllocationOrigin::traced);
    CHECK(m.at_peak[1].size == 7 * MiB);
    CHECK(frame_label(s, m.at_peak[1].user_frame) == "train.py:55 in train_step");
    CHECK(m.at_peak[1].category == MemoryCategory::gradients);
    CHECK(m.at_peak[5].size == 1 * MiB);
    CHECK(m.at_peak[5].user_frame == -1);  // only torch.distributed's frame: no user frame
    CHECK(m.at_peak[5].category == MemoryCategory::unknown);
    CHECK(m.at_peak[5].origin == AllocationOrigin::before_trace_alive_at_dump);
    // sites: model.py:40 8, train.py:55 7, train.py:12 (W1 + W2) 6 in 2, model.py:41 4, no user frame 1
    REQUIRE(m.sites.size() == 5);
    CHECK(frame_label(s, m.sites[2].frame) == "train.py:12 in build_model");
    CHECK(m.sites[2].bytes == 6 * MiB);
    CHECK(m.sites[2].count == 2);
    CHECK(m.sites[2].category == MemoryCategory::parameters);
    // categories: activations 8 + 4, gradients 7, parameters 4 + 2, unknown 1
    REQUIRE(m.categories.size() == 4);
    CHECK(m.categories[0].category == MemoryCategory::parameters);
    CHECK(m.categories[0].bytes == 6 * MiB);
    CHECK(m.categories[1].category == MemoryCategory::gradients);
    CHECK(m.categories[1].bytes == 7 * MiB);
    CHECK(m.categories[2].category == MemoryCategory::activations);
    CHECK(m.categories[2].bytes == 12 * MiB);
    CHECK(m.categories[2].count == 2);
    CHECK(m.categories[3].category == MemoryCategory::unknown);
    CHECK(m.categories[3].bytes == 1 * MiB);
    // the OOM at entry 20: 64 MiB asked, 10 MiB free on the device, 11 MiB allocated, 28 MiB reserved
    REQUIRE(m.ooms.size() == 1);
    CHECK(m.ooms[0].entry == 20);
    CHECK(m.ooms[0].requested == 64 * MiB);
    CHECK(m.ooms[0].device_free == 10 * MiB);
    CHECK(m.ooms[0].allocated == 11 * MiB);
    CHECK(m.ooms[0].reserved == 28 * MiB);
    CHECK(m.notes.empty());
    CHECK(a.peak_known);
    CHECK(a.peak_allocated_bytes == 26 * MiB);
}

}  // namespace

TEST_CASE("memory snapshot: a training step's figures, by hand, in protocols 2, 4, 5 and JSON", "[cpu][snapshot]") {
    for (const char* file :
         {"rank0_memory_snapshot.pickle", "snapshot_p2.pickle", "snapshot_p5.pickle", "snapshot.json"})
        check_training_step(file);
}

TEST_CASE("memory snapshot: the JSON report of two ranks, one without a trace", "[cpu][snapshot]") {
    // Given in the wrong order: the set is in rank order.
    const std::vector<RankSnapshot> ranks =
        load_rank_snapshots({dir + "rank1_memory_snapshot.pickle", dir + "rank0_memory_snapshot.pickle"});
    REQUIRE(ranks.size() == 2);
    CHECK(ranks[0].snapshot->rank == 0);
    CHECK(ranks[1].snapshot->rank == 1);
    const nlohmann::json j = app::snapshot_report_json(ranks)["memory_snapshot"];
    CHECK(j["reserved_bytes"] == 56 * MiB);
    CHECK(j["allocated_bytes"] == 20 * MiB);
    CHECK(j["active_bytes"] == 22 * MiB);
    CHECK(j["segments"] == 4);
    CHECK(j["trace_entries"] == 22);
    CHECK(j["peak_allocated_bytes"].is_null());  // rank 1 recorded no trace: its peak is unknown, not zero
    const auto& d0 = j["ranks"][0]["devices"][0];
    CHECK(d0["peak_allocated_bytes"] == 26 * MiB);
    CHECK(d0["fragmentation"]["largest_free_block_at_peak"] == 1 * MiB);
    CHECK(d0["oom_events"][0]["device_free_bytes"] == 10 * MiB);
    CHECK(d0["categories_at_peak"][0]["basis"] == "inferred");
    CHECK(d0["categories_at_peak"][3]["basis"] == "unknown");
    CHECK(d0["top_allocations_at_peak"][0]["site"] == "model.py:40 in forward");
    CHECK(j["ranks"][1]["devices"][0]["peak_allocated_bytes"].is_null());
    CHECK(app::format_snapshot_report(ranks[0]).find("peak allocated 26.00 MiB after entry 6") != std::string::npos);
}

TEST_CASE("memory snapshot: hostile files are refused with a message naming the file", "[cpu][snapshot]") {
    const std::pair<const char*, const char*> cases[] = {
        {"global_reduce_p2.pickle", "opcode GLOBAL (0x63) is a class or a call"},
        {"stack_global_p4.pickle", "opcode STACK_GLOBAL (0x93) is a class or a call"},
        {"build_p2.pickle", "opcode BUILD"},
        {"truncated.pickle", "FRAME declares 2863 bytes but only 1426 are left"},
        {"truncated_p2.pickle", "but only"},
        {"no_stop.pickle", "without its STOP"},
        {"huge_string.pickle", "declares 4611686018427387904 bytes but only 4 are left"},
        {"huge_frame.pickle", "FRAME declares"},
        {"huge_bytes.pickle", "BINBYTES declares 4294967295 bytes"},
        {"deep_marks.pickle", "more than 10000 nested MARKs"},
        {"deep_lists.pickle", "where a dict was expected"},
        {"deep.json", "nesting deeper than 10000"},
        {"memo_cycle_list.pickle", "where a dict was expected"},
        {"memo_cycle_dict.pickle", "segments[0]: no 'address'"},
        {"big_int.pickle", "wider than 64 bits"},
        {"bad_memo.pickle", "memo key 7, which was never stored"},
        {"protocol0.pickle", "a pickle of protocol 0 or 1: Ultrascope reads protocols 2 to 5"},
        {"not_a_snapshot.pickle", "no 'segments'"},
        {"bad_field.json", "segments[0]: 'address' is the string 'x', not an integer"},
        {"empty.pickle", "neither a pickle"},
        {"fuzz_float_size.json", "is a float, not an integer"},  // found by fuzz_pickle_reader: 1.4e102 as a size
    };
    for (const auto& [file, expected] : cases) {
        const std::string path = dir + "hostile/" + file;
        REQUIRE(std::filesystem::exists(path));
        const std::string msg = refusal(path);
        INFO(file << ": " << msg);
        CHECK(msg.find(path) != std::string::npos);
        CHECK(msg.find(expected) != std::string::npos);
    }
    CHECK(refusal(dir + "no_such_file.pickle").find("cannot open") != std::string::npos);
}

TEST_CASE("pickle reader: ints of every width, shared memo values, and cycles without recursion", "[cpu][snapshot]") {
    // [-1, 255, 65535, -2**31, 2**63-1 (LONG1 of 8 bytes), -2**63 (LONG1 of 8), 2**40 (LONG4 of 6), 1.5, True, None]
    const std::string ints = std::string("\x80\x04]\x94(J\xff\xff\xff\xffK\xffM\xff\xffJ\x00\x00\x00\x80", 20) +
                             std::string("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10) +
                             std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10) +
                             std::string("\x8b\x06\x00\x00\x00\x00\x00\x00\x00\x00\x01", 11) +
                             std::string("G\x3f\xf8\x00\x00\x00\x00\x00\x00\x88N", 11) + "e.";
    const PlainData d = read_pickle(ints, "ints");
    const auto items = d.items(d.root);
    REQUIRE(items.size() == 10);
    const int64_t want[] = {-1, 255, 65535, INT32_MIN, INT64_MAX, INT64_MIN, int64_t(1) << 40};
    for (size_t i = 0; i < 7; ++i) {
        int64_t v = 0;
        CHECK(d.get_int(items[i], v));
        CHECK(v == want[i]);
    }
    double f = 0;
    CHECK(d.get_number(items[7], f));
    CHECK(f == 1.5);
    CHECK(d.kind(items[8]) == PlainKind::boolean);
    CHECK(d.kind(items[9]) == PlainKind::none);
    // A list that holds itself: one value, its only item is its own index.
    const PlainData cycle = read_pickle(read_file(dir + "hostile/memo_cycle_list.pickle"), "cycle");
    REQUIRE(cycle.items(cycle.root).size() == 1);
    CHECK(cycle.items(cycle.root)[0] == cycle.root);
    // Memory stays a small multiple of the file's size, whatever the nesting.
    for (const char* f : {"deep_lists.pickle", "memo_cycle_list.pickle", "memo_cycle_dict.pickle"}) {
        const std::string bytes = read_file(dir + "hostile/" + f);
        const PlainData p = read_pickle(bytes, f);
        INFO(f << ": " << p.memory_bytes() << " bytes for a file of " << bytes.size());
        CHECK(p.memory_bytes() <= 32 * bytes.size() + 4096);
    }
    // A 9-byte LONG1 that is only a sign extension still fits in 64 bits (2**63 - 1 written with a zero byte).
    const PlainData wide =
        read_pickle(std::string("\x80\x04\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\x00.", 14), "wide");
    int64_t v = 0;
    CHECK((wide.get_int(wide.root, v) && v == INT64_MAX));
    CHECK_THROWS_WITH(read_pickle(std::string("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00.", 14), "w"),
                      Catch::Contains("wider than 64 bits"));
    // JSON: the same values through the SAX reader
    const PlainData j = read_plain_json(R"({"a": [1, -2, 1.5, "x", null, true], "b": 9223372036854775807})", "j");
    CHECK(j.items(j.find(j.root, "a")).size() == 6);
    CHECK((j.get_int(j.find(j.root, "b"), v) && v == INT64_MAX));
}

TEST_CASE("memory snapshot export: an Ultrascope trace's allocations read back as a snapshot", "[cpu][snapshot]") {
    // params +4096 (wte), activations +1000 (attn) +2000 (mlp), then mlp and attn freed, and a temporaries free
    // that matches nothing (left out); 512 B before the first event. Each allocation is its own segment.
    prof::Chunk ev;
    ev.kind = prof::ChunkKind::events;
    ev.rank = 0;
    ev.strings = {{0, "wte"}, {1, "attn"}, {2, "mlp"}, {3, "scratch"}};
    struct Ev {
        double t_ms;
        us::MemCategory c;
        int64_t delta;
        uint32_t label;
        prof::Phase phase;
    };
    const Ev events[] = {{1, us::MemCategory::params, 4096, 0, prof::Phase::none},
                         {2, us::MemCategory::activations, 1000, 1, prof::Phase::forward},
                         {3, us::MemCategory::activations, 2000, 2, prof::Phase::forward},
                         {4, us::MemCategory::activations, -2000, 2, prof::Phase::backward},
                         {5, us::MemCategory::activations, -1000, 1, prof::Phase::backward},
                         {6, us::MemCategory::temporaries, -64, 3, prof::Phase::optimizer}};
    for (const Ev& e : events) {
        prof::EventRecord r{};
        r.memory.type = uint8_t(prof::EventType::memory);
        r.memory.t_ns = int64_t(e.t_ms * 1e6);
        r.memory.category = uint8_t(e.c);
        r.memory.delta_bytes = e.delta;
        r.memory.label = e.label;
        r.memory.phase = uint8_t(e.phase);
        r.memory.step = 1;
        r.memory.layer = -1;
        ev.events.push_back(r);
    }
    ev.events[0].memory.total_bytes = 4096 + 512;  // 512 B were allocated before the first event
    prof::Chunk meta;
    meta.kind = prof::ChunkKind::metadata;
    meta.text = R"({"rank": 0, "world_size": 1})";
    prof::TraceStore store;
    store.add_chunk(meta);
    store.add_chunk(ev);
    store.finalize();
    SnapshotExportStats stats;
    const std::string bytes = memory_snapshot_of_rank(store, 0, stats);
    CHECK(stats.allocations == 4);
    CHECK(stats.frees == 2);
    CHECK(stats.unmatched_frees == 1);
    CHECK(stats.alive_at_end == 2);
    const MemorySnapshot s = parse_memory_snapshot(bytes, "export");
    CHECK(s.trace_entries() == 4 * 2 + 2 * 3);  // segment_alloc + alloc; free_requested + free_completed + segment_free
    const SnapshotAnalysis a = analyze_snapshot(s);
    REQUIRE(a.devices.size() == 1);
    const DeviceMemory& m = a.devices[0];
    CHECK(m.allocated_bytes == 4096 + 512);
    CHECK(m.reserved_bytes == 4096 + 512);
    CHECK(m.start_allocated == 0);
    CHECK(m.peak_allocated == 512 + 4096 + 1000 + 2000);
    CHECK(m.reserved_at_peak == 512 + 4096 + 1000 + 2000);
    CHECK(m.notes.empty());
    REQUIRE(m.at_peak.size() == 4);
    CHECK(m.at_peak[3].size == 512);
    CHECK(s.frame(s.stack(m.at_peak[3].stack)[0]).name == "(allocated before the first memory event)");
    CHECK(m.at_peak[0].size == 4096);
    const SnapshotFrame& f = s.frame(s.stack(m.at_peak[0].stack)[0]);
    CHECK(f.filename == "params");
    CHECK(f.name == "wte");
    // Written whole next to the name asked for; the trace without memory events is refused.
    const auto out = std::filesystem::temp_directory_path() / "us_test_export_snapshot.pickle";
    CHECK(export_memory_snapshots(store, out.string()) == std::vector<std::string>{out.string()});
    CHECK(load_memory_snapshot(out.string()).trace_entries() == 14);
    std::filesystem::remove(out);
    prof::TraceStore empty;
    empty.add_chunk(meta);
    empty.finalize();
    CHECK_THROWS_WITH(export_memory_snapshots(empty, out.string()), Catch::Contains("no memory events"));
}

TEST_CASE("memory snapshot: a peak at the trace's start, an unknown start, expandable segments", "[cpu][snapshot]") {
    const auto analyse = [](const std::string& json) {
        const MemorySnapshot s = parse_memory_snapshot(json, "inline.json");
        return analyze_snapshot(s).devices.at(0);
    };
    // Freed in the trace, allocated before it: the start holds it (100 B), and the peak is the start itself.
    const DeviceMemory a = analyse(R"({"segments": [], "device_traces": [[
        {"action": "free_requested", "addr": 4096, "size": 100, "stream": 0, "frames": []},
        {"action": "free_completed", "addr": 4096, "size": 100, "stream": 0, "frames": []}]]})");
    CHECK(a.start_known);
    CHECK(a.start_allocated == 100);
    CHECK(a.peak_allocated == 100);
    CHECK(a.peak_entry == -1);
    REQUIRE(a.at_peak.size() == 1);
    CHECK(a.at_peak[0].origin == AllocationOrigin::before_trace_freed_in_it);
    // Allocated in the trace but absent from the dump: the dump cannot explain it, so the start is unknown.
    const DeviceMemory b = analyse(R"({"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 4096, "size": 100, "stream": 0, "frames": []}]]})");
    CHECK_FALSE(b.start_known);
    CHECK(b.peak_allocated == 100);
    CHECK(b.notes.size() == 1);
    // Expandable segments: two 2 MiB pieces mapped, a 3 MiB block across both, then freed and the second piece
    // unmapped. At the peak (3 MiB, 4 MiB reserved) the only free run is the last 1 MiB of the second piece.
    const DeviceMemory c = analyse(R"({"segments": [{"device": 0, "address": 0, "total_size": 2097152,
        "blocks": [{"address": 0, "size": 2097152, "state": "inactive", "frames": []}]}], "device_traces": [[
        {"action": "segment_map", "addr": 0, "size": 2097152, "stream": 0, "frames": []},
        {"action": "segment_map", "addr": 2097152, "size": 2097152, "stream": 0, "frames": []},
        {"action": "alloc", "addr": 0, "size": 3145728, "stream": 0, "frames": []},
        {"action": "free_requested", "addr": 0, "size": 3145728, "stream": 0, "frames": []},
        {"action": "free_completed", "addr": 0, "size": 3145728, "stream": 0, "frames": []},
        {"action": "segment_unmap", "addr": 2097152, "size": 2097152, "stream": 0, "frames": []}]]})");
    CHECK(c.start_known);
    CHECK(c.start_reserved == 0);
    CHECK(c.peak_allocated == 3 * MiB);
    CHECK(c.reserved_at_peak == 4 * MiB);
    CHECK(c.peak_reserved == 4 * MiB);
    CHECK(c.largest_free_block_at_peak == 1 * MiB);
    CHECK(c.largest_free_block_at_dump == 2 * MiB);
}

TEST_CASE("ultrascope export --memory-snapshot writes a run's allocations as a snapshot that reads back",
          "[snapshot][cli]") {
    const std::string trace = std::string(US_TEST_DATA_DIR) + "/cpu/afab-pp1-tp2-tiny.ustrace";
    const std::string out = us::test::temp_path("export-snapshot.pickle");
    const auto r =
        us::test::run_process(us::test::bin("ultrascope") + " export " + trace + " --memory-snapshot " + out);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    // One snapshot per rank (the run has two), each a plain-data pickle our own reader takes, with a trace to replay.
    for (int rank = 0; rank < 2; ++rank) {
        const std::string file =
            (std::filesystem::path(out).parent_path() / ("rank" + std::to_string(rank) + "_export-snapshot.pickle"))
                .string();
        INFO(file);
        const auto snap = us::snap::load_memory_snapshot(file);
        const auto analysis = us::snap::analyze_snapshot(snap);
        REQUIRE(analysis.peak_known);
        CHECK(analysis.peak_allocated_bytes > 0);
    }
    const auto bad = us::test::run_process(us::test::bin("ultrascope") + " export " + trace);
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("--memory-snapshot") != std::string::npos);
}
