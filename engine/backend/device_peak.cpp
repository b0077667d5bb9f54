#include "engine/backend/device_peak.h"

#include <fmt/format.h>

#include <cctype>

namespace us {

namespace {

// `model` occurs in `name` as whole words: the characters around it are not letters or digits.
bool names_model(const std::string& name, const std::string& model) {
    for (size_t at = name.find(model); at != std::string::npos; at = name.find(model, at + 1)) {
        const bool start = at == 0 || !std::isalnum(static_cast<unsigned char>(name[at - 1]));
        const size_t end = at + model.size();
        const bool stop = end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));
        if (start && stop) return true;
    }
    return false;
}

}  // namespace

std::optional<DevicePeak> datasheet_peak(const std::string& device_name, bool bf16) {
    // Dense peaks (TFLOP/s) from NVIDIA's datasheets; the more specific names first.
    struct Entry {
        const char* model;
        const char* datasheet;
        double bf16_tflops, fp32_tflops;
    };
    static const Entry table[] = {
        {"GH200", "GH200", 989.4, 66.9},
        {"H200", "H200 SXM", 989.4, 66.9},
        {"H100 PCIe", "H100 PCIe", 756.0, 51.2},
        {"H100 NVL", "H100 NVL", 835.0, 60.0},
        {"H100", "H100 SXM", 989.4, 66.9},
        {"A100", "A100", 312.0, 19.5},
        {"L40S", "L40S", 362.1, 91.6},
        {"L40", "L40", 181.0, 90.5},
        {"L4", "L4", 121.0, 30.3},
        {"A10", "A10", 125.0, 31.2},
        {"RTX 4090", "GeForce RTX 4090", 165.2, 82.6},
        {"B200", "B200", 2250.0, 80.0},
    };
    for (const Entry& e : table)
        if (names_model(device_name, e.model))
            return DevicePeak{(bf16 ? e.bf16_tflops : e.fp32_tflops) * 1e3,
                              fmt::format("datasheet: NVIDIA {} dense {} peak", e.datasheet, bf16 ? "bf16" : "fp32")};
    return std::nullopt;
}

DevicePeak estimated_gpu_peak(int sm_count, int clock_khz, int major, int minor, bool bf16) {
    // fp32: FMA lanes per SM x 2: 64 lanes on A100 (8.0) and before Ampere, 128 on consumer Ampere/Ada and Hopper.
    // bf16 tensor cores, dense, fp32 accumulation: Hopper and later 4096 FLOPs per SM per clock, A100 2048,
    // consumer Ampere/Ada 1024, older 512.
    double per_clock = 0;
    if (!bf16)
        per_clock = major < 8 || (major == 8 && minor == 0) ? 128.0 : 256.0;
    else if (major >= 9)
        per_clock = 4096.0;
    else if (major == 8 && minor == 0)
        per_clock = 2048.0;
    else if (major == 8)
        per_clock = 1024.0;
    else
        per_clock = 512.0;
    return DevicePeak{double(sm_count) * double(clock_khz) * 1e3 * per_clock / 1e9,
                      fmt::format("estimate: {} SMs x {:.0f} MHz x {:.0f} {} FLOPs per SM per clock (sm_{}{})",
                                  sm_count, clock_khz / 1e3, per_clock, bf16 ? "bf16" : "fp32", major, minor)};
}

}  // namespace us
