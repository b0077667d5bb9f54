// The untracked device memory, named (engine/backend/device_footprint.h): each part is the growth of the device's
// memory in use less the allocator's reserved bytes across a library's start, on a backend whose device readings
// the test scripts; a CPU backend (no device reading) names nothing. The parts travel in the rank's metadata and
// the report prints them under "not tracked".
#include <catch2/catch.hpp>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/device_footprint.h"
#include "profiler/analysis/report.h"
#include "profiler/transport/rank_metadata.h"

using namespace us;

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;

}  // namespace

TEST_CASE("device footprint: each library's part is what the untracked device memory grew by across its start",
          "[cpu][memory]") {
    // The context and cuBLAS hold 600 MiB before any allocation of ours; then the allocator reserves 32 MiB
    // (tracked, no library's); NCCL's communicators take 210 MiB; while CUPTI starts another process frees 50 MiB.
    DeviceFootprint f;
    f.note("CUDA context and cuBLAS", 0, DeviceFootprint::untracked(600 * kMiB, 0));
    const int64_t before_nccl = DeviceFootprint::untracked(632 * kMiB, 32 * kMiB);
    CHECK(before_nccl == 600 * kMiB);
    f.note("NCCL communicators", before_nccl, DeviceFootprint::untracked(842 * kMiB, 32 * kMiB));
    f.note("CUPTI", DeviceFootprint::untracked(842 * kMiB, 32 * kMiB),
           DeviceFootprint::untracked(792 * kMiB, 32 * kMiB));
    REQUIRE(f.parts().size() == 3);
    CHECK(f.parts()[0].name == "CUDA context and cuBLAS");
    CHECK(f.parts()[0].bytes == 600 * kMiB);
    CHECK(f.parts()[1].bytes == 210 * kMiB);
    CHECK(f.parts()[2].bytes == 0);  // never below 0
    CHECK(DeviceFootprint::untracked(10 * kMiB, 32 * kMiB) == 0);

    CpuBackend cpu(1);  // no device reading: nothing is named
    DeviceFootprint none;
    none.note_start(cpu, "CUDA context and cuBLAS");
    none.note_since(cpu, "NCCL communicators", DeviceFootprint::untracked_now(cpu));
    CHECK(DeviceFootprint::untracked_now(cpu) == -1);
    CHECK(none.parts().empty());
}

TEST_CASE("device footprint: the parts survive the rank's metadata and the report prints them under not tracked",
          "[cpu][memory][schema]") {
    prof::RankMetadata m;
    m.backend = "cuda";
    m.device_memory_parts = {{"CUDA context and cuBLAS (at the backend's start)", 523 * kMiB},
                             {"NCCL communicators", 210 * kMiB}};
    nlohmann::json j = prof::to_json(m);
    CHECK(j["device_memory_parts"][1][0] == "NCCL communicators");
    j["device_memory_parts"].push_back("not a part");  // a malformed entry is skipped, the rest kept
    const prof::RankMetadata back = prof::rank_metadata_from_json(j);
    REQUIRE(back.device_memory_parts.size() == 2);
    CHECK(back.device_memory_parts[1].name == "NCCL communicators");
    CHECK(back.device_memory_parts[1].bytes == 210 * kMiB);
    CHECK(prof::rank_metadata_from_json(prof::to_json(prof::RankMetadata{})).device_memory_parts.empty());

    prof::Report rep;
    prof::RankReport r;
    r.label = "rank 0";
    r.process.sampled = true, r.process.device = true;
    r.process.held_peak = 4096 * kMiB, r.process.untracked_peak = 800 * kMiB;
    r.process.named_untracked = back.device_memory_parts;
    rep.ranks.push_back(r);
    const std::string text = prof::format_report(rep);
    INFO(text);
    CHECK(text.find("NCCL communicators") != std::string::npos);
    CHECK(text.find("CUDA context and cuBLAS (at the backend's start)") != std::string::npos);
    CHECK(text.find("device-wide readings") != std::string::npos);
}
