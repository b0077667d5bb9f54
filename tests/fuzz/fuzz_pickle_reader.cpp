// libFuzzer target: arbitrary bytes as a PyTorch memory snapshot (pickle or JSON), through the plain-data reader,
// the typed snapshot and its analysis. Anything but a clean UserError (a crash, a hang, a sanitizer report, memory
// past the fuzzer's limit) is a finding.
#include <cstdint>
#include <string_view>

#include "common/core/check.h"
#include "profiler/snapshot/frame_rules.h"
#include "profiler/snapshot/snapshot_analysis.h"
#include "profiler/snapshot/snapshot_series.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        const us::snap::MemorySnapshot snap = us::snap::parse_memory_snapshot(bytes, "fuzz input");
        const us::snap::SnapshotAnalysis a = us::snap::analyze_snapshot(snap);
        for (const auto& d : a.devices) {
            for (const auto& s : d.sites) (void)us::snap::frame_label(snap, s.frame);
            const us::snap::SnapshotSeries series = us::snap::build_series(snap, d);  // the GUI's categories over time
            (void)us::snap::category_peaks(series);
            (void)us::snap::sample_window(series, 0, series.size(), 7);
            (void)us::snap::sample_window(series, series.size() / 3, series.size(), 1000);
        }
    } catch (const us::UserError&) {
    }
    return 0;
}
