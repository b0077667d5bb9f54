// Ranks on different hosts do not share CLOCK_MONOTONIC. On one machine, a rank's clock is shifted by a known amount
// (ULTRASCOPE_FAKE_CLOCK_OFFSET_NS, testing only): the ping-pong estimate must recover it within the uncertainty it
// states, and the aligned spans must line up as they do without the shift.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/trace_store.h"
#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

TEST_CASE("a rank whose clock is 5 s off: the offset is estimated within its uncertainty and the steps line up",
          "[cpu][app][clock]") {
    const int64_t shift = 5'000'000'123;
    const std::string trace = temp_path("clock.ustrace");
    fs::remove(trace);
    const ProcessResult r = run_process("ULTRASCOPE_FAKE_CLOCK_OFFSET_NS=1:" + std::to_string(shift) + " " +
                                        bin("ultrascope") + " run -n 2 --dp 2 --preset tiny --steps 8 --trace " +
                                        trace + " --data " + sample_data_file("clock-data.txt", 20000));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("Clocks (measured: MPI ping-pong") != std::string::npos);

    const ProcessResult rep = run_process(bin("ultrascope") + " report " + trace + " --json");
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output);
    const auto& ranks = j["ranks"];
    REQUIRE(ranks.size() == 2);
    CHECK(ranks[0]["clock_offset_ns"] == 0);
    const int64_t offset = ranks[1]["clock_offset_ns"], uncertainty = ranks[1]["clock_uncertainty_ns"];
    INFO("estimated " << offset << " +- " << uncertainty << " ns, injected " << shift);
    CHECK(uncertainty > 0);
    CHECK(uncertainty < 50'000'000);  // one machine: round trips of microseconds, not tens of milliseconds
    CHECK(std::abs(offset - shift) <= uncertainty);

    // Data-parallel ranks finish each step together (the gradient all-reduce ends on both at once): aligned, their
    // step ends agree to milliseconds; unaligned they would be 5 s apart.
    us::prof::TraceStore store;
    us::prof::load_trace(trace, store);
    const auto steps0 = us::prof::analyze_steps(store, 0), steps1 = us::prof::analyze_steps(store, 1);
    REQUIRE(steps0.size() == 8);
    REQUIRE(steps1.size() == 8);
    for (size_t i = 0; i < steps0.size(); ++i) {
        INFO("step " << steps0[i].step << ": ends " << steps0[i].end << " and " << steps1[i].end);
        CHECK(std::abs(steps0[i].end - steps1[i].end) < 50'000'000);
    }
}

TEST_CASE("a malformed ULTRASCOPE_FAKE_CLOCK_OFFSET_NS is refused with what to write", "[cpu][app][clock][errors]") {
    const ProcessResult r = run_process("ULTRASCOPE_FAKE_CLOCK_OFFSET_NS=5s " + bin("ultrascope-train") +
                                        " --preset tiny --steps 1 --data " + sample_data_file("clock-data.txt", 20000));
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("expected RANK:NANOSECONDS") != std::string::npos);
}
