// The engine's group instances from grid coordinates (grid_coords.h).
#include "profiler/transport/grid_coords.h"

namespace us::prof {

std::string engine_group_instance(const GridCoords& coords, int group) {
    const GroupKind kind = GroupKind(group);
    if (kind == GroupKind::world) return "world";
    const GroupKind own = kind == GroupKind::embedding ? GroupKind::pp : kind;
    auto at = [&](GridDim d) { return coords[d].value_or(0); };
    std::string key;
    for (const GroupKind dim : {GroupKind::dp, GroupKind::pp, GroupKind::tp, GroupKind::cp}) {
        if (own == dim || (own == GroupKind::dp && dim == GroupKind::cp)) continue;  // dp reduces over dp x cp
        if (own == GroupKind::edp && (dim == GroupKind::cp || dim == GroupKind::dp)) {
            if (dim == GroupKind::dp) key += "ep=" + std::to_string(at(GridDim::ep)) + ";";
            continue;  // the ranks holding the same experts: same dp % ep, any dp / ep and cp
        }
        if (own == GroupKind::ep && dim == GroupKind::dp) {  // the ep dp ranks of one expert group
            key += "group=" + std::to_string(at(GridDim::dp) - at(GridDim::ep)) + ";";
            continue;
        }
        key += std::string(group_kind_name(dim)) + "=" + std::to_string(at(*grid_dim_of(dim))) + ";";
    }
    return key;
}

}  // namespace us::prof
