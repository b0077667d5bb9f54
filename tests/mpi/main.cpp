// The runner of the multi-rank tests: started by mpirun (ctest does it), MPI is initialised around the Catch2
// session. Every rank runs every test; a test that needs another world size returns early.
#include <mpi.h>

#include "engine/comm/mpi_comm.h"

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

int main(int argc, char* argv[]) {
    us::MpiRuntime::init(&argc, &argv, std::getenv("US_TEST_COMM_PROGRESS") ? std::getenv("US_TEST_COMM_PROGRESS") : "thread");
    Catch::Session session;
    int rc = session.applyCommandLine(argc, argv);
    if (rc == 0) rc = session.run();
    // A rank whose test failed must fail the whole mpirun.
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    us::MpiRuntime::finalize();
    return worst;
}
