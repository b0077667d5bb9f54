// The memory profiler's categories (prof.export_memory_timeline, measured) beside an imported PyTorch run: the
// timelines found among the paths the run was opened from, each placed on its rank's trace clock and compared with
// the categories we infer from the [memory] events' ops. Used by `report` (text and JSON) and the GUI's memory view.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/import/kineto_memory_ops.h"
#include "profiler/import/memory_category_agreement.h"
#include "profiler/import/memory_timeline.h"
#include "profiler/trace/run_info.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

struct RankMemoryCategories {
    bool measured = false;    // a memory profiler timeline was given for this rank
    MemoryTimeline timeline;  // measured (when `measured`)
    TimelinePeaks peaks;
    // Inferred from the [memory] events' ops (kineto_memory_ops.h), when the rank's trace has them: the bytes
    // allocated since profiling began, on the same clock as the measured timeline.
    std::optional<MemoryTimeline> inferred;
    TimelinePeaks inferred_peaks;
    int rank = -1;              // -1: the file name does not say and the run has several ranks
    std::optional<int> device;  // as a [memory] "Device Id" (-1 host), when the trace's events tell it
    // store time (ns) = times_us * 1000 + offset_ns; nullopt when the trace has no [memory] events to place it by.
    std::optional<int64_t> offset_ns;
    std::optional<CategoryAgreement> grouped, strict;  // inferred against measured (derived)
    std::vector<std::string> notes;

    std::optional<int64_t> store_time(int64_t profiler_us) const {
        if (!offset_ns) return std::nullopt;
        return profiler_us * 1000 + *offset_ns;
    }
};

// Loads every memory timeline among `paths` (named files, or found by name in folders) for the run in `store`, and
// the categories inferred from the ranks' [memory] events (`memory`: as the loader kept them, load_run or the GUI's
// progressive load; every rank with events, with a timeline or not), with their agreement with the measured ones.
// Throws UserError naming a damaged file. The two halves: the files only (safe on a worker), then placing them on
// the store's clock.
std::vector<RankMemoryCategories> load_memory_categories(const std::vector<std::string>& paths, const TraceStore& store,
                                                         const RunInfo& run,
                                                         const std::vector<KinetoMemoryEvents>& memory);
std::vector<RankMemoryCategories> read_memory_categories(const std::vector<std::string>& paths, const RunInfo& run,
                                                         const std::vector<KinetoMemoryEvents>& memory);
void place_memory_categories(std::vector<RankMemoryCategories>& ranks, const TraceStore& store);

// {"ranks": [{"basis": "measured" (the memory profiler) or "inferred", ...}]}; docs/pytorch-memory.md.
// Whether the run has [memory] events (what the inference reads).
bool has_memory_events(const TraceStore& store);

nlohmann::json memory_categories_json(const std::vector<RankMemoryCategories>& ranks);
std::string format_memory_categories(const std::vector<RankMemoryCategories>& ranks);
std::string device_label(std::optional<int> device);  // "host memory", "cuda:0", "device unknown"

}  // namespace us::prof
