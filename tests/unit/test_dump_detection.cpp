// What `ultrascope PATH` opens as a hung job's dumps (hang::looks_like_flight_dump, read by the GUI's opener and
// the headless fallback): a dump in PyTorch's pickle, and not a PyTorch profiler trace (whose distributedInfo names
// pg_config and nccl_version too), a memory snapshot or a text file. Only the first bytes are looked at: the reader
// decides the rest.
#include <catch2/catch.hpp>

#include <filesystem>

#include "flight_job.h"
#include "profiler/flight/flight_writer.h"
#include "profiler/hang/flight_reader.h"
#include "test_util.h"

using namespace us;

TEST_CASE("a Flight Recorder dump looks like one, a profiler trace or a memory snapshot does not", "[cpu][hang]") {
    test::FlightJob job(2);
    job.config("0", "default_pg", {0, 1});
    job.collective("0", "default_pg", {0, 1}, "nccl:all_reduce", 8);
    const std::string dump = test::temp_path("detect_comm_lib_trace_rank_0");
    REQUIRE(flight::save_flight_dump(job.dumps[0], dump));
    CHECK(hang::looks_like_flight_dump(dump));
    const std::string data = US_TEST_DATA_DIR;
    for (const std::string& not_dump :
         {data + "/kineto/dp2_tp2/iteration_4/rank0_trace.json.gz", data + "/snapshot/rank0_memory_snapshot.pickle"}) {
        INFO(not_dump);
        REQUIRE(std::filesystem::exists(not_dump));
        CHECK_FALSE(hang::looks_like_flight_dump(not_dump));
    }
    const std::string text = test::temp_path("detect_text");
    test::write_file(text, "a text file, no dump");
    CHECK_FALSE(hang::looks_like_flight_dump(text));
    CHECK_FALSE(hang::looks_like_flight_dump(test::temp_path("detect_no_such_file")));
}
