// A rank's place in the parallel grid (dp x pp x cp x tp, ep carved out of dp: docs/architecture.md), typed: its
// coordinate along each dimension (GridCoords) and the grid's size along it (GridSizes), each unknown (nullopt) where
// the source does not say (an imported PyTorch rank names no grid), never a made-up 0 or 1. Read and written through
// grid_json / grid_from_json by the rank metadata's (de)serializer, whose JSON ({"dp": 0, "pp": 1, ...}) traces have
// always had; the analysis reads the fields.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "profiler/event.h"

namespace us::prof {

enum class GridDim : uint8_t { dp, pp, tp, cp, ep };
inline constexpr std::array<GridDim, 5> kGridDims = {GridDim::dp, GridDim::pp, GridDim::tp, GridDim::cp, GridDim::ep};
// The dimension's key in the metadata's JSON, and its name in labels ("rank 3 (dp 1, pp 0)").
inline constexpr std::string_view kGridDimNames[] = {"dp", "pp", "tp", "cp", "ep"};
inline constexpr std::string_view grid_dim_name(GridDim d) { return kGridDimNames[size_t(d)]; }
// The dimension an engine's group spans: dp, pp, tp, cp, ep for their groups; none for world, embedding and edp.
inline constexpr std::optional<GridDim> grid_dim_of(GroupKind g) {
    switch (g) {
        case GroupKind::dp:
            return GridDim::dp;
        case GroupKind::pp:
            return GridDim::pp;
        case GroupKind::tp:
            return GridDim::tp;
        case GroupKind::cp:
            return GridDim::cp;
        case GroupKind::ep:
            return GridDim::ep;
        default:
            return std::nullopt;
    }
}

// One integer per grid dimension, where known. `Tag` keeps coordinates and sizes apart as types.
template <typename Tag>
struct GridValues {
    std::optional<int> dp, pp, tp, cp, ep;

    const std::optional<int>& operator[](GridDim d) const {
        switch (d) {
            case GridDim::dp:
                return dp;
            case GridDim::pp:
                return pp;
            case GridDim::tp:
                return tp;
            case GridDim::cp:
                return cp;
            default:
                return ep;
        }
    }
    std::optional<int>& operator[](GridDim d) {
        return const_cast<std::optional<int>&>(static_cast<const GridValues&>(*this)[d]);
    }
    // Nothing known (an imported rank).
    bool empty() const { return !dp && !pp && !tp && !cp && !ep; }
    bool operator==(const GridValues&) const = default;
};

using GridCoords = GridValues<struct GridCoordsTag>;  // the rank's 0-based place along each dimension
using GridSizes = GridValues<struct GridSizesTag>;    // the grid's degree along each dimension

// {"dp": 0, "pp": 1, ...}: the known dimensions only ({} when none is).
template <typename Tag>
nlohmann::json grid_json(const GridValues<Tag>& v) {
    nlohmann::json j = nlohmann::json::object();
    for (GridDim d : kGridDims)
        if (v[d]) j[std::string(grid_dim_name(d))] = *v[d];
    return j;
}

// The integer entries of a {"dp": i, ...} object; anything else (a missing key, another type) stays unknown.
template <typename Values>
Values grid_from_json(const nlohmann::json& j) {
    Values v;
    if (!j.is_object()) return v;
    for (GridDim d : kGridDims)
        if (auto it = j.find(std::string(grid_dim_name(d))); it != j.end() && it->is_number_integer())
            v[d] = it->get<int>();
    return v;
}

// The instance of the engine's group `group` (a GroupKind) a rank at `coords` belongs to, as a key: the ranks that
// share every coordinate but the group's own ("world" for the world group; dp reduces over dp x cp; an expert group is
// ep neighbouring dp ranks, the experts' data-parallel group the ranks holding the same experts).
std::string engine_group_instance(const GridCoords& coords, int group);

}  // namespace us::prof
