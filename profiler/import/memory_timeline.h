// The PyTorch memory profiler's categories over time: what `prof.export_memory_timeline(path, device)` writes as
// JSON (.json or .json.gz), `[times, sizes]`: times in microseconds on the profiler's clock (a Kineto trace's ts +
// baseTimeNanoseconds / 1000) and, per time, the bytes of each category (measured by the profiler's own tensor
// tracking). Read with our own small parser: the exact shape only, bounded, errors naming the file.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace us::prof {

// torch.profiler._memory_profiler's categories in the export's column order (column 0 of a row is unused; the last
// column is the tensors the profiler could not categorize).
enum class ProfilerCategory : uint8_t {
    parameter,
    optimizer_state,
    input,
    temporary,
    activation,
    gradient,
    autograd_detail,
    unknown
};
inline constexpr size_t kProfilerCategories = 8;
const char* profiler_category_name(ProfilerCategory c);   // "parameter", "optimizer_state" ...
const char* profiler_category_label(ProfilerCategory c);  // "parameters", "optimizer state" ...

// a + b, held at the int64 limits instead of overflowing (sums of hostile byte counts).
inline int64_t add_saturated(int64_t a, int64_t b) {
    int64_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
// The largest magnitude the reader accepts for a time or a byte count (2^53: 8 PiB, or 285 years of microseconds).
inline constexpr int64_t kTimelineMaxValue = int64_t(1) << 53;

struct MemoryTimeline {
    std::string source;             // the file
    int rank = -1;                  // from the file name (rank0, rank_0 ...), -1 when it does not say
    std::vector<int64_t> times_us;  // non-decreasing
    std::vector<int64_t> bytes;     // times_us.size() x kProfilerCategories, row by row

    size_t size() const { return times_us.size(); }
    int64_t at(size_t row, ProfilerCategory c) const { return bytes[row * kProfilerCategories + size_t(c)]; }
    int64_t total(size_t row) const;
};

// The figures the report and the views show: each category's own peak, and every category's bytes at the moment the
// total peaks (the first such row).
struct TimelinePeaks {
    size_t total_peak_row = 0;
    int64_t total_peak_bytes = 0, total_peak_time_us = 0;
    std::array<int64_t, kProfilerCategories> peak_bytes{}, at_total_peak{};
};
TimelinePeaks timeline_peaks(const MemoryTimeline& t);

// Parses the export's JSON text. Throws UserError naming `source` and the place on anything but the exact shape.
MemoryTimeline parse_memory_timeline(std::string_view json, const std::string& source);
// Reads a file (plain or gzip). Throws UserError naming the file.
MemoryTimeline load_memory_timeline(const std::string& path);

// Whether a file is a memory timeline export: by its name inside a folder ("memory_timeline" in a .json/.json.gz
// name), by its first bytes ("[[") when `sniff`.
bool is_memory_timeline_file(const std::string& path, bool sniff);
// The timelines among `paths` (files named on the command line, sniffed; folders searched by name), sorted.
std::vector<std::string> find_memory_timelines(const std::vector<std::string>& paths);

}  // namespace us::prof
