// MFU's denominator: datasheet peaks matched by whole model names (an L40 is not an L4, an A100 not an A10), and the
// SMs x clock estimate with its source spelled out.
#include "engine/backend/device_peak.h"
#include "test_util.h"

using namespace us;

TEST_CASE("datasheet peaks match whole model names, the more specific first", "[cpu][analysis]") {
    struct Case {
        const char* device;
        double bf16_tflops;  // 0: not in the table
        const char* datasheet;
    };
    for (const Case& c :
         {Case{"NVIDIA H100 80GB HBM3", 989.4, "H100 SXM"}, Case{"NVIDIA H100 PCIe", 756.0, "H100 PCIe"},
          Case{"NVIDIA H100 NVL", 835.0, "H100 NVL"}, Case{"NVIDIA H200", 989.4, "H200 SXM"},
          Case{"NVIDIA GH200 480GB", 989.4, "GH200"}, Case{"NVIDIA L4", 121.0, "L4"}, Case{"NVIDIA L40", 181.0, "L40"},
          Case{"NVIDIA L40S", 362.1, "L40S"}, Case{"NVIDIA A100-SXM4-80GB", 312.0, "A100"},
          Case{"NVIDIA A10", 125.0, "A10"}, Case{"NVIDIA GeForce RTX 4090", 165.2, "GeForce RTX 4090"},
          Case{"Tesla T4", 0, ""}, Case{"NVIDIA L4X", 0, ""}}) {
        INFO(c.device);
        const auto peak = datasheet_peak(c.device, true);
        REQUIRE(peak.has_value() == (c.bf16_tflops > 0));
        if (!peak) continue;
        CHECK(peak->gflops == Approx(c.bf16_tflops * 1e3));
        CHECK(peak->source.find(std::string("NVIDIA ") + c.datasheet + " dense bf16") != std::string::npos);
    }
    CHECK(datasheet_peak("NVIDIA H100 80GB HBM3", false)->gflops == Approx(66.9e3));
}

TEST_CASE("a GPU missing from the table gets an estimate that says how it was made", "[cpu][analysis]") {
    const DevicePeak p = estimated_gpu_peak(132, 1980000, 9, 0, true);  // an H100's SMs and boost clock
    CHECK(p.gflops == Approx(132 * 1.98e9 * 4096 / 1e9));
    CHECK(p.source.rfind("estimate: 132 SMs x 1980 MHz", 0) == 0);
    CHECK(estimated_gpu_peak(108, 1410000, 8, 0, false).gflops == Approx(108 * 1.41e9 * 128 / 1e9));  // A100 fp32
}
