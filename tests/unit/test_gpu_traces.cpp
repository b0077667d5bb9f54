// Traces recorded on an NVIDIA H100 (CUPTI on, docs/gpu.md "Verified on an H100"), read back by the analysis on
// any machine: the GPU path of the report keeps working where CI has no GPU. The files are committed as they came
// from ultrascope-train: small preset fp32 on one GPU, and dp 2 with both ranks on one GPU (MPI with host staging).
#include "profiler/analysis/report.h"
#include "test_util.h"

using namespace us::prof;

namespace {

const std::string kDir = std::string(US_TEST_DATA_DIR) + "/gpu/";

Report report_of(const std::string& file) {
    TraceStore store;
    load_trace(kDir + file, store);
    return build_report(store);
}

}  // namespace

TEST_CASE("an H100 trace: GPU time, CUPTI's account, memory as predicted", "[cpu][analysis][gpu-trace]") {
    const Report rep = report_of("small-h100.ustrace");
    REQUIRE(rep.ranks.size() == 1);
    const RankReport& r = rep.ranks[0];
    CHECK(r.steady.device_truth);
    CHECK(r.steady.compute_s > 0);
    CHECK(r.steady.compute_s <= r.steady.wall_s);
    CHECK(r.peak_source.find("H100") != std::string::npos);
    REQUIRE(r.cupti.is_object());
    CHECK(r.cupti.value("dropped_records", -1) == 0);
    const int64_t records = r.cupti.value("kernels", int64_t(0)) + r.cupti.value("memcpys", int64_t(0)) +
                            r.cupti.value("memsets", int64_t(0));
    CHECK(records > 1000);
    CHECK(r.cupti.value("attributed", int64_t(0)) >= records * 99 / 100);
    CHECK(r.device_reserved_peak > 0);
    for (auto c : {us::MemCategory::params, us::MemCategory::grads, us::MemCategory::optimizer_state,
                   us::MemCategory::activations}) {
        INFO(us::mem_category_name(c));
        CHECK(r.memory.peak[size_t(c)] == r.predicted.memory[size_t(c)].value_or(-1));
    }
    const std::string text = format_report(rep);
    CHECK(text.find("CUPTI recorded") != std::string::npos);
    CHECK(report_json(rep)["ranks"][0]["time_source"] == "device");
}

TEST_CASE("an H100 trace of two ranks sharing the GPU: the staged all-reduce is the communication",
          "[cpu][analysis][gpu-trace]") {
    const Report rep = report_of("dp2-shared-h100.ustrace");
    REQUIRE(rep.ranks.size() == 2);
    for (const RankReport& r : rep.ranks) {
        INFO(r.label);
        CHECK(r.steady.device_truth);
        CHECK(r.cupti.value("nccl_kernels", -1) == 0);  // ranks on one GPU: MPI with host staging, no NCCL
        // no NCCL kernels, so M is the engine's collectives: the gradient all-reduce, mostly exposed
        CHECK(r.steady.comm_s > 0);
        CHECK(r.steady.exposed_s > 0);
        CHECK(r.steady.overlapped_s + r.steady.exposed_s == Approx(r.steady.comm_s));
        const auto dp = size_t(GroupKind::dp);
        const double steps = double(steady_steps(r.steps).size());
        REQUIRE(steps > 0);
        CHECK(r.steady.group_bytes[dp] / steps == Approx(double(r.predicted.comm_bytes[dp])));  // per step
    }
}
