// Where a run and what was said of it disagree: every memory category, communication group and the pipeline bubble
// whose measured figure differs by more than 10% from the prediction (the engine's exact walk) or from the formula
// (the textbook). A known, documented difference carries its explanation; one without is a bug in the prediction
// (or the engine) and the tests fail on it (issue 32). `ultrascope report` prints them first; the GUI marks the rows.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace us::prof {

struct Report;
struct RankReport;

inline constexpr double kMissTolerance = 0.10;  // |measured / expected - 1| above this is a miss

struct Miss {
    std::string what;  // "memory.activations", "comm.tp", "pipeline.bubble"
    int rank = -1;     // -1: the run as a whole (the pipeline bubble of its busiest stage)
    double measured = 0;
    double predicted = 0;                  // the figure it is compared with (the prediction's or the formula's)
    std::string source;                    // "predicted" | "formula"
    std::optional<std::string> explained;  // why, where the difference is known and documented
    double ratio() const;                  // measured / predicted (infinity when predicted is 0)
    bool is_memory() const { return what.rfind("memory.", 0) == 0; }
};

// Every miss of a measured run, in the order the report shows its figures (none for a planner's prediction).
std::vector<Miss> find_misses(const Report& report);

// The misses of one row of the GUI's tables (a rank's memory category, a rank's group, the bubble).
std::vector<const Miss*> misses_of(const std::vector<Miss>& misses, const std::string& what, int rank);
// One line per miss: "rank 0 memory.activations: measured 372.75 MiB, predicted 46.59 MiB (x8.00): why".
std::string format_miss(const Miss& m);
// The report's opening lines ("" when nothing misses).
std::string format_misses(const std::vector<Miss>& misses);
nlohmann::json misses_json(const std::vector<Miss>& misses);
size_t unexplained_count(const std::vector<Miss>& misses);

}  // namespace us::prof
