#include "profiler/analysis/collective_waits.h"

#include <algorithm>
#include <string>
#include <vector>

namespace us::prof {

namespace {

// The ranks that share every grid coordinate but the group's own form one instance of the group.
std::string instance_key(const nlohmann::json& coords, int group) {
    const std::string_view name = kGroupNames[group];
    if (name == "world") return "world";
    const std::string own = name == "embedding" ? "pp" : std::string(name);
    std::string key;
    for (const char* dim : {"dp", "pp", "tp", "cp"}) {
        if (own == dim || (own == "dp" && std::string(dim) == "cp")) continue;  // dp reduces over dp x cp
        if (own == "edp" && (std::string(dim) == "cp" || std::string(dim) == "dp")) {
            if (std::string(dim) == "dp") key += "ep=" + std::to_string(coords.value("ep", 0)) + ";";
            continue;  // the ranks holding the same experts: same dp % ep, any dp / ep and cp
        }
        if (own == "ep" && std::string(dim) == "dp") {  // the ep dp ranks of one expert group
            key += "group=" + std::to_string(coords.value("dp", 0) - coords.value("ep", 0)) + ";";
            continue;
        }
        key += std::string(dim) + "=" + std::to_string(coords.value(dim, 0)) + ";";
    }
    return key;
}

}  // namespace

std::map<int, std::array<double, kGroupCount>> collective_waits(const TraceStore& store, int first_steady_step) {
    std::map<int, std::array<double, kGroupCount>> waits;
    // (group, instance) -> per member rank, the durations of its collectives in issue (begin) order
    std::map<std::pair<int, std::string>, std::map<int, std::vector<int64_t>>> members;
    for (int r : store.ranks()) {
        waits[r].fill(0.0);
        const RankTrace& rt = *store.rank(r);
        const nlohmann::json coords = rt.metadata.value("coords", nlohmann::json::object());
        for (const Span& s : rt.lanes[size_t(Lane::comm)].spans()) {  // sorted by begin
            if (s.kind != SpanKind::comm || s.group >= kGroupCount || s.step < first_steady_step) continue;
            // Collectives only: point-to-point transfers (the cp ring's) overlap each other and pair up across
            // ranks as send and receive, not as one operation.
            if (s.op == OpClass::send || s.op == OpClass::recv) continue;
            members[{s.group, instance_key(coords, s.group)}][r].push_back(s.end - s.begin);
        }
    }
    for (const auto& [group, ranks] : members) {
        if (ranks.size() < 2) continue;
        size_t count = SIZE_MAX;  // a truncated trace: match what every member recorded
        for (const auto& [r, durations] : ranks) count = std::min(count, durations.size());
        for (size_t k = 0; k < count; ++k) {
            int64_t transfer = INT64_MAX;
            for (const auto& [r, durations] : ranks) transfer = std::min(transfer, durations[k]);
            for (const auto& [r, durations] : ranks)
                waits[r][size_t(group.first)] += double(durations[k] - transfer) / 1e9;
        }
    }
    return waits;
}

}  // namespace us::prof
