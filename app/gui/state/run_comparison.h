// The runs of this session kept for the Compare view: each run's figures, archived once, when it ends or another
// source replaces it.
#pragma once

#include <string>
#include <vector>

#include "app/gui/model/compare_model.h"
#include "app/gui/model/training_model.h"

namespace us::gui {

struct RunComparison {
    std::vector<RunSummary> runs;   // in the order they ended
    bool current_archived = false;  // the current source's run is already in `runs`

    void archive(const prof::Report& report, const std::vector<TrainingPoint>& training, const std::string& label,
                 const std::string& trace_path) {
        if (current_archived) return;
        runs.push_back(summarize_run(report, label, trace_path, training.empty() ? 0.0 : training.back().loss));
        current_archived = true;
    }
};

}  // namespace us::gui
