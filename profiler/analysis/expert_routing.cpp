// Each MoE layer's routing over the steps, from the engine's counters (expert_routing.h).
#include "profiler/analysis/expert_routing.h"

#include "profiler/analysis/steady_step.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

namespace us::prof {

namespace {

// "moe.layer{l}.expert{e}" -> (l, e); "moe.layer{l}.dropped" -> (l, -1); anything else false.
bool parse_routing_counter(const std::string& name, int& layer, int& expert) {
    int consumed = 0;
    if (std::sscanf(name.c_str(), "moe.layer%d.expert%d%n", &layer, &expert, &consumed) == 2 &&
        consumed == int(name.size()))
        return true;
    consumed = 0;
    if (std::sscanf(name.c_str(), "moe.layer%d.dropped%n", &layer, &consumed) == 1 && consumed == int(name.size())) {
        expert = -1;
        return true;
    }
    return false;
}

// A counter's value per step (the last one recorded in the step).
std::map<int, double> by_step(const std::vector<CounterPoint>& points) {
    std::map<int, double> out;
    for (const CounterPoint& p : points) out[p.step] = p.value;
    return out;
}

}  // namespace

ExpertRouting analyze_expert_routing(const TraceStore& store) {
    ExpertRouting r;
    // layer -> expert (-1: dropped) -> step -> value, from the first rank that recorded the layer
    std::map<int, std::map<int, std::map<int, double>>> raw;
    std::map<int, int> layer_rank;
    std::map<int, double> balance, aux;
    for (int rank : store.ranks()) {
        const RankTrace& rt = *store.rank(rank);
        for (const auto& [id, points] : rt.counters) {
            const std::string& name = store.name(id);
            int layer = 0, expert = 0;
            if (parse_routing_counter(name, layer, expert)) {
                auto [it, inserted] = layer_rank.emplace(layer, rank);
                if (it->second != rank) continue;
                raw[layer][expert] = by_step(points);
            } else if (name == "moe_balance" && balance.empty()) {
                balance = by_step(points);
            } else if (name == "moe_aux_loss" && aux.empty()) {
                aux = by_step(points);
            }
        }
    }
    for (const auto& [layer, experts] : raw) r.experts = std::max(r.experts, experts.rbegin()->first + 1);
    for (const auto& [step, value] : balance) {
        r.steps.push_back(step);
        r.balance.push_back(value);
        r.aux_loss.push_back(aux.count(step) ? aux[step] : 0.0);
    }
    for (const auto& [layer, experts] : raw) {
        LayerRouting lr;
        lr.layer = layer;
        const auto first = experts.find(0);
        if (first == experts.end()) continue;
        for (const auto& [step, v] : first->second) lr.steps.push_back(step);
        lr.share.assign(size_t(r.experts), 0.0);
        double total = 0, dropped = 0, imbalance_sum = 0;
        int steady = 0;
        for (size_t i = 0; i < lr.steps.size(); ++i) {
            const int step = lr.steps[i];
            std::vector<double> row(size_t(r.experts), 0.0);
            for (int e = 0; e < r.experts; ++e)
                if (auto it = experts.find(e); it != experts.end() && it->second.count(step))
                    row[size_t(e)] = it->second.at(step);
            double drop = 0;
            if (auto it = experts.find(-1); it != experts.end() && it->second.count(step)) drop = it->second.at(step);
            lr.choices.push_back(row);
            lr.dropped.push_back(drop);
            if (i < first_steady_index(lr.steps.front(), lr.steps.size())) continue;  // step 1 is not steady
            double sum = 0, most = 0;
            for (double c : row) sum += c, most = std::max(most, c);
            for (int e = 0; e < r.experts; ++e) lr.share[size_t(e)] += row[size_t(e)];
            total += sum;
            dropped += drop;
            const double imbalance = sum > 0 ? most / (sum / r.experts) : 0.0;
            imbalance_sum += imbalance;
            lr.imbalance_max = std::max(lr.imbalance_max, imbalance);
            ++steady;
        }
        if (total > 0)
            for (double& s : lr.share) s /= total;
        lr.imbalance_mean = steady > 0 ? imbalance_sum / steady : 0.0;
        lr.dropped_fraction = total > 0 ? dropped / total : 0.0;
        r.layers.push_back(std::move(lr));
    }
    return r;
}

nlohmann::json expert_routing_json(const ExpertRouting& r) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerRouting& l : r.layers)
        layers.push_back({{"layer", l.layer},
                          {"steps", l.steps},
                          {"choices_per_expert", l.choices},
                          {"dropped", l.dropped},
                          {"share", l.share},
                          {"imbalance_mean", l.imbalance_mean},
                          {"imbalance_max", l.imbalance_max},
                          {"dropped_fraction", l.dropped_fraction}});
    return {{"experts", r.experts},
            {"layers", layers},
            {"steps", r.steps},
            {"balance", r.balance},
            {"aux_loss", r.aux_loss}};
}

}  // namespace us::prof
