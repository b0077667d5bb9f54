// What `ultrascope report PATHS`, `ultrascope PATHS` headless and the GUI open PATHS as (app/report/input_kind.h):
// one rule for the three. Before it the GUI read a Flight Recorder dump named .pickle as a memory snapshot while the
// report read it as dumps.
#include <catch2/catch.hpp>

#include <filesystem>

#include "app/report/input_kind.h"
#include "test_util.h"

using namespace us;
using app::InputKind;

TEST_CASE("input kind: dumps by their content, then snapshots, else traces", "[cpu][app][report][hang]") {
    const std::string data = US_TEST_DATA_DIR;
    const std::string dumps = data + "/hang/rank_stops", snapshot = data + "/snapshot/rank0_memory_snapshot.pickle";
    const std::string trace = data + "/cpu/afab-pp1-tp2-tiny.ustrace";
    CHECK(app::input_kind({dumps}) == InputKind::flight_dumps);
    CHECK(app::input_kind({dumps + "/comm_lib_trace_rank_0", dumps + "/comm_lib_trace_rank_1"}) ==
          InputKind::flight_dumps);
    CHECK(app::input_kind({dumps + "/comm_lib_trace_rank_*"}) == InputKind::flight_dumps);  // a glob
    // a dump renamed .pickle is a dump, not a snapshot
    const std::string renamed = test::temp_path("rank0.pickle");
    std::filesystem::copy_file(dumps + "/comm_lib_trace_rank_0", renamed,
                               std::filesystem::copy_options::overwrite_existing);
    CHECK(app::input_kind({renamed}) == InputKind::flight_dumps);
    CHECK(app::input_kind({snapshot}) == InputKind::memory_snapshots);
    CHECK(app::input_kind({snapshot, data + "/snapshot/rank1_memory_snapshot.pickle"}) == InputKind::memory_snapshots);
    CHECK(app::input_kind({data + "/snapshot/snapshot.json"}) == InputKind::memory_snapshots);
    // traces, and anything mixed or missing: the trace reader says what is wrong
    CHECK(app::input_kind({trace}) == InputKind::traces);
    CHECK(app::input_kind({data + "/kineto/dp2_tp2/iteration_4"}) == InputKind::traces);
    CHECK(app::input_kind({snapshot, trace}) == InputKind::traces);
    CHECK(app::input_kind({dumps, trace}) == InputKind::flight_dumps);  // the hang report names the trace left out
    // a shell's glob of a dumps' folder: its notes and an empty dump of a rank that died writing come along
    CHECK(app::input_kind({dumps + "/comm_lib_trace_rank_0", dumps + "/expected.json", test::temp_path("empty")}) ==
          InputKind::flight_dumps);
    CHECK(app::input_kind({test::temp_path("no_such_file")}) == InputKind::traces);
    CHECK(app::input_kind({}) == InputKind::traces);
}

TEST_CASE("input kind: a command line's paths are its arguments that are not flags", "[cpu][app][report]") {
    std::string cmd = "report", json = "--json", a = "A", b = "B", cluster = "--cluster", c = "C";
    char* argv[] = {cmd.data(), json.data(), a.data(), b.data(), cluster.data(), c.data()};
    CHECK(app::command_paths(6, argv) == std::vector<std::string>{"A", "B", "C"});
    CHECK(app::command_paths(1, argv).empty());
    // a flag's value that names no file does not keep snapshots from their report
    const std::string snapshot = std::string(US_TEST_DATA_DIR) + "/snapshot/rank0_memory_snapshot.pickle";
    CHECK(app::input_kind({snapshot, "4"}) == InputKind::memory_snapshots);
}
