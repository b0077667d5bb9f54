// The memory profiler's categories (prof.export_memory_timeline, measured) beside an imported PyTorch run: the
// timelines found among the paths the run was opened from, each placed on its rank's trace clock and compared with
// the categories we infer from the [memory] events' ops. Used by `report` (text and JSON) and the GUI's memory view.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/import/memory_category_agreement.h"
#include "profiler/import/memory_timeline.h"
#include "profiler/trace/run_info.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

struct RankMemoryCategories {
    bool measured = false;          // a memory profiler timeline was given for this rank
    prof::MemoryTimeline timeline;  // measured (when `measured`)
    prof::TimelinePeaks peaks;
    // Inferred from the [memory] events' ops (kineto_memory_ops.h), when the rank's trace has them: the bytes
    // allocated since profiling began, on the same clock as the measured timeline.
    std::optional<prof::MemoryTimeline> inferred;
    prof::TimelinePeaks inferred_peaks;
    int rank = -1;              // -1: the file name does not say and the run has several ranks
    std::optional<int> device;  // as a [memory] "Device Id" (-1 host), when the trace's events tell it
    // store time (ns) = times_us * 1000 + offset_ns; nullopt when the trace has no [memory] events to place it by.
    std::optional<int64_t> offset_ns;
    std::optional<prof::CategoryAgreement> grouped, strict;  // inferred against measured (derived)
    std::vector<std::string> notes;

    std::optional<int64_t> store_time(int64_t profiler_us) const {
        if (!offset_ns) return std::nullopt;
        return profiler_us * 1000 + *offset_ns;
    }
};

// Loads every memory timeline among `paths` (named files, or found by name in folders) for the run in `store`.
// `infer`: also read the ranks' Kineto files again for the inferred categories (every rank with [memory] events,
// with a timeline or not) and their agreement with the measured ones. Throws UserError naming a damaged file. The
// two halves: the files only (safe on a worker), then placing them on the store's clock.
std::vector<RankMemoryCategories> load_memory_categories(const std::vector<std::string>& paths,
                                                         const prof::TraceStore& store, const prof::RunInfo& run,
                                                         bool infer);
std::vector<RankMemoryCategories> read_memory_categories(const std::vector<std::string>& paths,
                                                         const prof::RunInfo& run, bool infer);
void place_memory_categories(std::vector<RankMemoryCategories>& ranks, const prof::TraceStore& store);

// {"ranks": [{"basis": "measured" (the memory profiler) or "inferred", ...}]}; docs/pytorch-memory.md.
// Whether the run has [memory] events (what the inference reads).
bool has_memory_events(const prof::TraceStore& store);

nlohmann::json memory_categories_json(const std::vector<RankMemoryCategories>& ranks);
std::string format_memory_categories(const std::vector<RankMemoryCategories>& ranks);
std::string device_label(std::optional<int> device);  // "host memory", "cuda:0", "device unknown"

}  // namespace us::app
