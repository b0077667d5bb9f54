// The Compare view's waterfall (docs/diff.md): from run A's step to run B's, one bar per cause of the difference
// (profiler/diff/run_diff.h), each starting where the last ended, then what is left unexplained, then B's step. The
// bars are data here, so the view only draws them and a test checks that they land on B's step.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/model/compare_model.h"
#include "profiler/diff/run_diff.h"

namespace us::gui {

struct WaterfallBar {
    std::string label;  // "A's step", "compute (attention)", "unexplained", "B's step"
    double from_ms = 0, to_ms = 0;
    std::string source;  // "measured", "derived"
    int cause = -1;      // into RunDiff::causes; -1 for the steps and the unexplained part
};

// The diff of kept runs a and b (indexes; each summary holds its run's cross-rank facts), the other kept runs of A's
// settings its repeats (the noise between runs); nullopt with `why` set when it cannot be made (a run without its
// facts, without a steady step).
std::optional<prof::RunDiff> diff_summaries(const std::vector<RunSummary>& kept, size_t a, size_t b, std::string& why);

// A's step, the causes (at most `most`, the rest summed into one bar), the unexplained part, B's step.
std::vector<WaterfallBar> waterfall_bars(const prof::RunDiff& d, size_t most = 8);

}  // namespace us::gui
