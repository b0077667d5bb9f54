// An injected hang (--hang-rank R --hang-at-step S --hang-kind skip|mismatch|p2p; docs/engine-flight-recorder.md),
// for teaching and for the tests of hang detection. At step S rank R
//   skip:     stops before the step's collectives and never comes back, as a rank stuck in its data loader would;
//             the others wait in their next collective;
//   mismatch: records its data-parallel gradient all-reduce with another size, as if it reduced another tensor,
//             and waits there without calling MPI (mismatched counts are undefined behaviour): everyone arrived, the
//             sizes differ;
//   p2p:      receives where its pipeline stage should send, so that it and its neighbour each wait for the other.
// The fault is labelled as injected wherever it shows: the log line, the rank metadata, every flight recorder dump.
#pragma once

#include <string>

#include "common/settings/config.h"
#include "engine/comm/communicator.h"

namespace us {

enum class HangFault : uint8_t { none, skip, mismatch, p2p };

class InjectedHang {
public:
    InjectedHang() = default;
    InjectedHang(const TrainConfig& cfg, int world_rank);
    // The run's injected hang in words ("" when none), the same on every rank.
    static std::string describe(const TrainConfig& cfg);

    void begin_step(int step) { m_step = step; }
    // Whether this rank's fault is `kind` and its step has come.
    bool fires(HangFault kind) const { return m_fault == kind && m_step == m_at_step; }
    // Says what the rank does on stderr (always, even --quiet), then never returns.
    [[noreturn]] void block(const std::string& what) const;
    // p2p: the receive posted where `group`'s send to `peer` should be, then waits on it (never matched).
    [[noreturn]] void receive_instead_of_send(Communicator& group, Tensor buf, int peer, int tag) const;

private:
    HangFault m_fault = HangFault::none;
    int m_at_step = 0;
    int m_step = 0;
    int m_rank = -1;
    std::string m_kind;
};

}  // namespace us
