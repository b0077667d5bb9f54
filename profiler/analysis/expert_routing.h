// Mixture-of-experts routing as a trace records it: the trainer's counters (moe.layer{l}.expert{e}: the choices
// expert e of MoE block l received over the step's global batch; moe.layer{l}.dropped; moe_balance; moe_aux_loss)
// turned into what a user asks of a router: how evenly each layer spreads its tokens, step by step and over the
// steady steps, and how much capacity dropped. Measured, all of it.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::prof {

struct LayerRouting {
    int layer = 0;
    std::vector<int> steps;                    // the steps recorded, in order
    std::vector<std::vector<double>> choices;  // [step][expert]: choices the expert received (dropped included)
    std::vector<double> dropped;               // per step
    // Over the steady steps (all but the first when there are several):
    std::vector<double> share;                     // per expert, of all choices (1/E each when even)
    double imbalance_mean = 0, imbalance_max = 0;  // most loaded expert over the mean, per step (1 = even)
    double dropped_fraction = 0;                   // dropped choices over all choices
};

struct ExpertRouting {
    int experts = 0;
    std::vector<LayerRouting> layers;  // by layer
    std::vector<int> steps;
    std::vector<double> balance;   // per step: E sum_i f_i P_i, mean over layers and sequences (1 = even)
    std::vector<double> aux_loss;  // per step: the balance loss as weighted into the training loss
    bool empty() const { return layers.empty(); }
};

// From every rank's counters (a layer's figures are the same on every rank of its pipeline stage; the first rank
// that has them is read).
ExpertRouting analyze_expert_routing(const TraceStore& store);

nlohmann::json expert_routing_json(const ExpertRouting& r);

}  // namespace us::prof
