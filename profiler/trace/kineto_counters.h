// The counters the PyTorch profiler's [memory] events become in a trace store (profiler/import/kineto_reader.cpp):
// the caching allocator's totals after each event, per device, and the host's as its own series. The reader writes
// them; the imported run's report and the GUI's memory plot read them.
#pragma once

namespace us::prof {

inline constexpr char kKinetoAllocatedCounter[] = "kineto_allocated_bytes";
inline constexpr char kKinetoReservedCounter[] = "kineto_reserved_bytes";
inline constexpr char kKinetoCpuAllocatedCounter[] = "kineto_cpu_allocated_bytes";

}  // namespace us::prof
