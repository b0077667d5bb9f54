// The injected hang (injected_hang.h).
#include "engine/parallel/injected_hang.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace us {

InjectedHang::InjectedHang(const TrainConfig& cfg, int world_rank) {
    if (cfg.hang_rank != world_rank) return;
    m_fault = cfg.hang_kind == "mismatch" ? HangFault::mismatch
              : cfg.hang_kind == "p2p"    ? HangFault::p2p
                                          : HangFault::skip;
    m_at_step = cfg.hang_at_step;
    m_rank = world_rank;
    m_kind = cfg.hang_kind;
}

std::string InjectedHang::describe(const TrainConfig& cfg) {
    if (cfg.hang_rank < 0) return {};
    const std::string what = cfg.hang_kind == "mismatch" ? "all-reduces a gradient bucket of another size and waits"
                             : cfg.hang_kind == "p2p"    ? "receives where its pipeline stage should send"
                                                         : "stops calling collectives";
    return fmt::format("injected hang: rank {} {} at step {} (--hang-rank {} --hang-at-step {} --hang-kind {})",
                       cfg.hang_rank, what, cfg.hang_at_step, cfg.hang_rank, cfg.hang_at_step, cfg.hang_kind);
}

void InjectedHang::block(const std::string& what) const {
    std::fprintf(stderr, "ultrascope-train: rank %d: injected hang at step %d (--hang-kind %s): %s\n", m_rank, m_step,
                 m_kind.c_str(), what.c_str());
    std::fflush(stderr);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // a stop signal's thread ends the process
}

void InjectedHang::receive_instead_of_send(Communicator& group, Tensor buf, int peer, int tag) const {
    CommHandle h = group.irecv(buf, peer, tag);  // nothing is ever sent with this tag in this direction
    std::fprintf(
        stderr,
        "ultrascope-train: rank %d: injected hang at step %d (--hang-kind p2p): receives from pipeline rank %d "
        "where it should send to it; both now wait for the other\n",
        m_rank, m_step, peer);
    std::fflush(stderr);
    h->wait();
    block("its receive completed, which it never should");
}

}  // namespace us
