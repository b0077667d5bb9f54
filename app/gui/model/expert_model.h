// The experts view's data, from the report: per MoE layer a heatmap of the router's load, experts by steps, each
// cell the choices the expert received in the step over an even share (1 = even, 2 = twice its share, 0 = idle),
// with the layer's imbalance and drops; and per rank the time its experts computed next to the time it waited in
// expert parallelism's all-to-alls, which is where an uneven router shows up as idle GPUs. Measured, all of it.
#pragma once

#include <string>
#include <vector>

#include "profiler/analysis/report.h"

namespace us::gui {

struct ExpertHeatmap {
    int layer = 0;
    int experts = 0;
    std::vector<int> steps;
    std::vector<float> load;  // [expert * steps.size() + column]: choices / (step's choices / E)
    float max_load = 0;
    double imbalance_mean = 0, imbalance_max = 0, dropped_fraction = 0;
    float at(int expert, int column) const { return load[size_t(expert) * steps.size() + size_t(column)]; }
};

struct ExpertRankTime {
    int rank = 0;
    std::string label;
    // per steady step:
    double experts_s = 0;  // expert GEMMs
    double ep_s = 0;       // all-to-alls outstanding
    double ep_wait_s = 0;  // of which waiting for the group's last rank
};

struct ExpertModel {
    std::vector<ExpertHeatmap> layers;
    std::vector<ExpertRankTime> ranks;  // with ep > 1
    std::vector<int> steps;
    std::vector<float> balance;  // per step: E sum f P
    bool empty() const { return layers.empty(); }
};

ExpertModel build_expert_model(const prof::Report& report);

}  // namespace us::gui
