// ultrascope-train: trains the bundled GPT. One process per rank; mpirun starts several. Parses the flags, builds
// the backend and the process grid, and hands over to the training session (engine/train/training_session.h);
// the parallelisms are composed by the trainer.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <pthread.h>
#include <thread>

#include "engine/backend/backend.h"
#include "engine/backend/device_footprint.h"
#include "engine/backend/cpu/blas_kernel.h"
#include "engine/comm/flight_dumps.h"
#include "engine/comm/mpi_comm.h"
#include "common/core/check.h"
#include "engine/parallel/grid.h"
#include "common/settings/cli.h"
#include "engine/train/training_session.h"
#include "profiler/record/recorder.h"

namespace {

using namespace us;

// SIGTERM / SIGINT (mpirun stopping the job, Ctrl-C): a dedicated thread ends the trace streams with a note that
// the run did not finish, so the data up to that point stays readable, then exits. SIGUSR1 (`ultrascope run`
// through mpirun, or a user's kill -USR1) asks for the flight recorder's dump, which the dump thread writes.
void install_signal_thread() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread created from here on
    std::thread([set] {
        int sig = 0;
        while (sigwait(&set, &sig) == 0 && sig == SIGUSR1) request_flight_dump("SIGUSR1");
        std::fprintf(stderr, "ultrascope-train: pid %d stopped by signal %d (%s)\n", int(getpid()), sig,
                     sig == SIGTERM ? "the launcher is stopping the job; when a rank died, its message names it"
                                    : "interrupted");
        prof::stop_recording(false, sig == SIGTERM
                                        ? "SIGTERM: the launcher stopped the run (when a rank died, it names it)"
                                        : "SIGINT: interrupted");
        std::_Exit(128 + sig);
    }).detach();
}

// Ends MPI on every way out of run().
struct MpiSession {
    ~MpiSession() { MpiRuntime::finalize(); }
};

int run(int argc, char** argv) {
    ParsedTrainArgs args = parse_train_args(argc, argv);
    if (args.help_requested) {
        std::printf("%s", args.help_text.c_str());
        return 0;
    }
    TrainCommandLine& cmd = args.cmd;
    TrainConfig& cfg = cmd.config;
    cfg.validate();
    if (cmd.print_config) {
        std::printf("%s\n", cfg.to_json().dump(2).c_str());
        return 0;
    }
    install_signal_thread();
    MpiSession mpi_session;
    std::unique_ptr<Communicator> world;
    if (launched_by_mpi()) {
        MpiRuntime::init(&argc, &argv, cfg.runtime.comm_progress);
        world = MpiRuntime::world();
    } else {
        world = make_local_communicator(GroupKind::world);
    }
    cfg.parallel.check_world(world->size());  // so --slow-rank, checked against the layout, is a rank of the run
    // The backend before the grid: the grid's device communicators (NCCL) use the backend's streams, so they must
    // be destroyed first.
    BackendOptions bo;
    bo.kind = cfg.device;
    bo.threads = cfg.threads;
    bo.cudnn_attention = cfg.attention == Attention::cudnn;
    auto backend = make_backend(bo);
    device_footprint().note_start(*backend, "CUDA context and cuBLAS (at the backend's start)");
    ProcessGrid grid(cfg.parallel, std::move(world));
    return run_training(cfg, *backend, grid);
}

}  // namespace

int main(int argc, char** argv) {
    us::cpu::ensure_openblas_kernel(argv);  // may re-execute this program with OPENBLAS_CORETYPE set
    try {
        return run(argc, argv);
    } catch (const us::UserError& e) {
        std::fprintf(stderr, "ultrascope-train: error: %s\n", e.what());
        return 2;
    }
}
