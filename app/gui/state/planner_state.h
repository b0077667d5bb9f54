// The Planner view's state (File > New plan): the model, cluster and GPU count the user picked, the search over
// layouts running on a worker thread (16,384 GPUs take a while), its ranked result and the selected layout.
#pragma once

#include <future>
#include <optional>
#include <string>

#include "app/plan/planner.h"
#include "profiler/analysis/report.h"

namespace us::gui {

struct PlannerState {
    bool open = false;
    std::string model = "llama3-8b", cluster = "h100-sxm";
    int gpus = 64;
    int global_batch = 512;  // sequences per step (0: one micro-batch per data-parallel rank)
    int selected = 0;        // row of `result->ranked`

    struct Plan {
        predict::ModelDesc model;
        predict::ClusterDesc cluster;
        plan::SearchResult search;
    };
    std::optional<Plan> result;
    std::string error;  // why the last search could not run (an unknown model, too many GPUs, ...)
    // The layout last launched from the view, and the live run it became (a later launch elsewhere is not it):
    // its measured figures are shown beside this prediction.
    bool launch_best_here = false;  // --plan-launch: once planned, launch the best layout this machine can run
    bool show_best = false;         // --plan-show: once planned, show the best fitting layout's predicted step
    std::optional<predict::PlanResult> launched;
    std::string launched_cluster;
    const void* launched_run = nullptr;

    // Starts a search with the current choices (the previous one, if running, finishes first).
    void start();
    bool searching() const { return m_pending.valid(); }
    // Installs a finished search (once per frame).
    void poll();

private:
    std::future<Plan> m_pending;
};

// A layout this machine can run: this engine's model, ranks up to a handful.
bool runnable_here(const predict::ModelDesc& model, const predict::PlanResult& r);

// The measured figure to put beside a memory prediction: the largest, over the ranks, of the sum of the measured
// peaks of the categories the prediction models.
int64_t measured_modelled_peak(const prof::Report& report, const predict::MemoryEstimate& predicted);

}  // namespace us::gui
