// A device's dense peak for MFU, and where it came from. The CPU's is measured (sgemm of the same BLAS on the
// rank's threads); a GPU's comes from NVIDIA's datasheets when the device is in the table, or else from SMs x clock
// x the architecture's FLOPs per SM per clock. The source travels with the figure: MFU is a derived number, and
// its denominator must say what it is.
#pragma once

#include <optional>
#include <string>

namespace us {

struct DevicePeak {
    double gflops = 0;   // 0: unknown (MFU is then not shown)
    std::string source;  // "measured sgemm ...", "datasheet NVIDIA H100 SXM ...", "estimate: ..."
};

// The datasheet dense peak (bf16 tensor cores with fp32 accumulation, or fp32) of a GPU by its marketing name
// (cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3"). Models match as whole words: an "L40" is not an "L4",
// an "H100 PCIe" is not an SXM "H100". nullopt when the name is not in the table.
std::optional<DevicePeak> datasheet_peak(const std::string& device_name, bool bf16);

// SMs x clock x dense FLOPs per SM per clock for compute capability major.minor (an estimate).
DevicePeak estimated_gpu_peak(int sm_count, int clock_khz, int cc_major, int cc_minor, bool bf16);

}  // namespace us
