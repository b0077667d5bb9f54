// The process grid: world = dp x pp x cp x tp ranks, tp innermost (neighbouring ranks share a tensor-parallel
// group, as they would share a node's fast links), dp outermost. Expert parallelism is carved out of dp (Megatron,
// torchtitan): dp rank d is expert-parallel rank d % ep of the expert group of dp ranks [d - d % ep, + ep), which
// holds every expert once; the d / ep-th copies of an expert are reduced over the expert-data-parallel group. Each
// rank's coordinates and one communicator per dimension are built once; everything derived from the grid is named after
// its dimension (dp_rank, pp_next ...). Degrees whose parallelism is not implemented are carried (the metadata shows
// them) but refused by validate. Groups: dp (same model shard, different data), pp (the stages of one replica), tp (the
// ranks that split each layer), cp (the ranks that split each sequence), the data-parallel reduction group dp x cp
// (context-parallel ranks hold partial gradients of the same parameters: cp joins dp for the gradient reduction and
// ZeRO, as in Megatron), and the first and last stages of a replica for the tied embedding.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "common/settings/config.h"

namespace us {

struct GridCoords {
    int dp = 0, pp = 0, cp = 0, ep = 0, tp = 0;
};

// Coordinates of a world rank, and back (pure functions, tested on their own).
GridCoords grid_coords(const ParallelLayout& p, int world_rank);
int grid_rank(const ParallelLayout& p, const GridCoords& c);

class ProcessGrid {
public:
    // Builds the groups by splitting `world` (MPI), or local groups when the world has one rank.
    ProcessGrid(const ParallelLayout& p, std::unique_ptr<Communicator> world);

    const ParallelLayout& degrees() const { return m_p; }
    int world_rank() const { return m_world->rank(); }
    int world_size() const { return m_world->size(); }
    const GridCoords& coords() const { return m_coords; }

    Communicator& world() { return *m_world; }
    Communicator& dp_group() { return *m_dp; }
    Communicator& pp_group() { return *m_pp; }
    Communicator& tp_group() { return *m_tp; }
    Communicator& cp_group() { return *m_cp; }
    // The gradient reduction and ZeRO group: dp x cp ranks (the dp group itself when cp is 1).
    Communicator& dp_cp_group() { return m_dp_cp ? *m_dp_cp : *m_dp; }
    // Expert parallelism: the ep ranks that hold every expert once between them, and the ranks that hold the same
    // experts (x cp), over which the experts' gradients are reduced.
    Communicator& ep_group() { return *m_ep; }
    Communicator& edp_group() { return *m_edp; }
    int ep_rank() const { return m_coords.ep; }
    int ep_size() const { return m_p.ep; }
    int edp_rank() const { return m_coords.dp / m_p.ep; }
    // The first and last pipeline stages of one data-parallel replica (tied embedding gradients).
    Communicator& embedding_group() { return *m_embedding; }

    int dp_rank() const { return m_coords.dp; }
    int dp_size() const { return m_p.dp; }
    int pp_rank() const { return m_coords.pp; }
    int pp_size() const { return m_p.pp; }
    int tp_rank() const { return m_coords.tp; }
    int cp_rank() const { return m_coords.cp; }
    int cp_size() const { return m_p.cp; }
    int tp_size() const { return m_p.tp; }
    bool pp_is_first_stage() const { return m_coords.pp == 0; }
    bool pp_is_last_stage() const { return m_coords.pp == m_p.pp - 1; }
    int pp_next() const { return m_coords.pp + 1; }  // ranks within pp_group()
    int pp_prev() const { return m_coords.pp - 1; }

    // Moves the groups that carry the backend's tensors (dp, tp, embedding: collectives; pp: tagged transfers) onto
    // communicators for its memory (engine/comm/device_comm.h). Collective over the world. Returns how each group's
    // bytes travel, for the run's metadata, e.g. "dp: nccl, pp: mpi with host staging (...), embedding: nccl".
    std::string use_device_communicators(Backend& backend);
    // Records every group of more than one rank, the world too, in the flight recorder (engine/comm/recording_comm.h),
    // each named "<dimension>:<its lowest world rank>" (dp_cp for the dp x cp reduction group). Before anything takes
    // a group: the trainer, tp and cp keep references to the communicators.
    void record_in_flight();
    // Replaces each of those groups by what `wrap` makes of it (the step above, and tests of the wrappers).
    void wrap_groups(
        const std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator>, GroupKind)>& wrap);

private:
    ParallelLayout m_p;
    GridCoords m_coords;
    std::unique_ptr<Communicator> m_world, m_dp, m_pp, m_tp, m_cp, m_dp_cp, m_ep, m_edp, m_embedding;
};

}  // namespace us
