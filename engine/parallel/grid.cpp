#include "engine/parallel/grid.h"

#include <fmt/format.h>

#include "engine/comm/device_comm.h"
#include "engine/comm/mpi_comm.h"
#include "engine/comm/recording_comm.h"
#include "common/core/check.h"

namespace us {

GridCoords grid_coords(const ParallelLayout& p, int r) {
    GridCoords c;
    c.tp = r % p.tp;
    r /= p.tp;
    c.cp = r % p.cp;
    r /= p.cp;
    c.pp = r % p.pp;
    r /= p.pp;
    c.dp = r;
    c.ep = c.dp % p.ep;  // expert parallelism is carved out of dp: consecutive dp ranks share their experts
    return c;
}

int grid_rank(const ParallelLayout& p, const GridCoords& c) {
    return ((c.dp * p.pp + c.pp) * p.cp + c.cp) * p.tp + c.tp;
}

ProcessGrid::ProcessGrid(const ParallelLayout& p, std::unique_ptr<Communicator> world)
    : m_p(p), m_world(std::move(world)) {
    m_coords = grid_coords(p, m_world->rank());
    if (m_world->size() == 1) {
        m_dp = make_local_communicator(GroupKind::dp);
        m_pp = make_local_communicator(GroupKind::pp);
        m_tp = make_local_communicator(GroupKind::tp);
        m_cp = make_local_communicator(GroupKind::cp);
        m_ep = make_local_communicator(GroupKind::ep);
        m_edp = make_local_communicator(GroupKind::edp);
        m_embedding = make_local_communicator(GroupKind::embedding);
        return;
    }
    const GridCoords& c = m_coords;
    // Ranks that agree on every other coordinate share a group; the key orders them by their own coordinate.
    auto color_without = [&](GridCoords x, int GridCoords::*dim) {
        x.*dim = 0;
        return grid_rank(p, x);
    };
    m_dp = MpiRuntime::split(*m_world, color_without(c, &GridCoords::dp), c.dp, GroupKind::dp);
    m_pp = MpiRuntime::split(*m_world, color_without(c, &GridCoords::pp), c.pp, GroupKind::pp);
    m_tp = MpiRuntime::split(*m_world, color_without(c, &GridCoords::tp), c.tp, GroupKind::tp);
    m_cp = MpiRuntime::split(*m_world, color_without(c, &GridCoords::cp), c.cp, GroupKind::cp);
    if (p.cp > 1) {  // ranks that differ only in dp and cp; spans name it dp (the data-parallel reduction)
        GridCoords x = c;
        x.dp = 0, x.cp = 0;
        m_dp_cp = MpiRuntime::split(*m_world, grid_rank(p, x), c.dp * p.cp + c.cp, GroupKind::dp);
    }
    {  // expert groups: dp ranks [d - d % ep, + ep) share the experts; those with the same d % ep (x cp) hold the
       // same ones
        GridCoords x = c;
        x.dp = c.dp - c.dp % p.ep;
        m_ep = MpiRuntime::split(*m_world, grid_rank(p, x), c.ep, GroupKind::ep);
        GridCoords y = c;
        y.dp = c.dp % p.ep, y.cp = 0;
        m_edp = MpiRuntime::split(*m_world, grid_rank(p, y), (c.dp / p.ep) * p.cp + c.cp, GroupKind::edp);
    }
    // The tied embedding lives on the first and the last stage of each replica.
    const bool holds_embedding = c.pp == 0 || c.pp == p.pp - 1;
    // Colors must be non-negative: ranks outside the group get a color of their own.
    m_embedding = MpiRuntime::split(
        *m_world, holds_embedding ? color_without(c, &GridCoords::pp) : m_world->size() + m_world->rank(), c.pp,
        GroupKind::embedding);
}

std::string ProcessGrid::use_device_communicators(Backend& backend) {
    std::string paths;
    wrap_groups([&](std::unique_ptr<Communicator> group, GroupKind kind) {
        // Pipeline transfers are matched by tag; the data-parallel and embedding groups only run collectives.
        // The cp ring's exchanges are grouped send/receive pairs posted in one order on every rank: NCCL runs them
        // with the collectives (DeviceTraffic::collectives); the pipeline's tagged transfers get channels of their
        // own (engine/comm/nccl_pipe_comm.h).
        DeviceComm d = make_device_communicator(
            std::move(group), backend, kind == GroupKind::pp ? DeviceTraffic::tagged : DeviceTraffic::collectives);
        paths += fmt::format("{}{}: {}", paths.empty() ? "" : ", ", group_kind_name(kind), d.path);
        return std::move(d.comm);
    });
    return paths;
}

void ProcessGrid::record_in_flight() {
    const std::pair<std::unique_ptr<Communicator>*, const char*> groups[] = {
        {&m_world, "world"}, {&m_dp, "dp"},   {&m_pp, "pp"},
        {&m_tp, "tp"},       {&m_cp, "cp"},   {&m_dp_cp, "dp_cp"},
        {&m_ep, "ep"},       {&m_edp, "edp"}, {&m_embedding, "embedding"}};
    for (auto [group, label] : groups)
        if (*group) *group = ::us::record_in_flight(std::move(*group), label);
}

void ProcessGrid::wrap_groups(
    const std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator>, GroupKind)>& wrap) {
    m_dp = wrap(std::move(m_dp), GroupKind::dp);
    m_pp = wrap(std::move(m_pp), GroupKind::pp);
    m_tp = wrap(std::move(m_tp), GroupKind::tp);
    m_cp = wrap(std::move(m_cp), GroupKind::cp);
    if (m_dp_cp) m_dp_cp = wrap(std::move(m_dp_cp), GroupKind::dp);
    m_ep = wrap(std::move(m_ep), GroupKind::ep);
    m_edp = wrap(std::move(m_edp), GroupKind::edp);
    m_embedding = wrap(std::move(m_embedding), GroupKind::embedding);
}

}  // namespace us
