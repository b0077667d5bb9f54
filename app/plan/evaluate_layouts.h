// The search's layouts evaluated on every core: each run of neighbouring layouts with the same tp, cp and pp (a
// group: they share their schedules and pipeline simulations) goes whole to the next free thread, which evaluates it
// with its own predict::SharedWork. Each result lands at its layout's index, so the caller reads them in the order it
// enumerated them, as one thread would have made them: the ranking, ties included, does not depend on the threads.
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/predict/evaluate.h"

namespace us::plan {

struct EvaluatedLayout {
    bool refused = false;        // check_layout refused it (the settings rules): no result
    predict::PlanResult result;  // evaluate()'s, when not refused
};

struct EvaluateThreads {
    int threads = 0;         // 0: one per core (std::thread::hardware_concurrency)
    bool share_work = true;  // false: every layout from scratch, no predict::SharedWork
};

// Checks (predict::check_layout) and evaluates each layout of `gpus` GPUs. An error other than a refusal is thrown
// after every thread has stopped: the first in the layouts' order, as one thread would have met it.
std::vector<EvaluatedLayout> evaluate_layouts(const predict::ModelDesc& model, const predict::ClusterDesc& cluster,
                                              int64_t gpus, const std::vector<predict::Layout>& layouts,
                                              const EvaluateThreads& how);

}  // namespace us::plan
