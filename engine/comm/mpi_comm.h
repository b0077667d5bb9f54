// MPI (Open MPI, host memory). The runtime owns MPI's lifetime and the *progress engine*: every operation is an
// MPI_I* call whose completion is detected either by a progress thread (default; it polls MPI_Testsome with short
// sleeps so that it costs the compute threads almost nothing) or by the compute loop itself between ops
// (--comm-progress poll). docs/communication.md has the measurements behind the default. Completed operations are
// recorded as spans from launch to completion. An operation that does not complete within the watchdog's limit
// aborts the whole job (MPI_Abort) rather than hanging it.
#pragma once

#include <memory>
#include <string>

#include "engine/comm/communicator.h"

namespace us {

// Whether this process was started by an MPI launcher (mpirun, srun with PMIx): then MPI is initialised.
bool launched_by_mpi();

class MpiRuntime {
public:
    // MPI_Init_thread; `progress` is "thread" or "poll".
    static void init(int* argc, char*** argv, const std::string& progress);
    static bool initialized();
    static void finalize();
    [[noreturn]] static void abort(int code, const std::string& why);
    static int world_rank();
    static int world_size();
    // The world communicator and MPI_Comm_split of it; color/key as MPI's.
    static std::unique_ptr<Communicator> world(GroupKind kind = GroupKind::world);
    static std::unique_ptr<Communicator> split(const Communicator& parent, int color, int key, GroupKind kind);
    // Poll mode: advances outstanding operations (called by the compute loop between ops). Cheap when idle.
    static void progress();
    // This rank's CLOCK_MONOTONIC minus rank 0's, and the estimate's uncertainty (half the best round trip);
    // both 0 when every rank runs on one host (they share the clock).
    static void estimate_clock_offset(int64_t& offset_ns, int64_t& uncertainty_ns);
    static std::string processor_name();
    // The MPI library's name and version ("Open MPI v4.1.4"), for flight recorder dumps.
    static std::string library_version();
};

}  // namespace us
