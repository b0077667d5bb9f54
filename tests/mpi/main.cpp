// The runner of the multi-rank tests: started by mpirun (ctest does it), MPI is initialised around the Catch2
// session. Every rank runs every test of the tags it is given; a test REQUIREs the world size it needs, and a test
// case that checks nothing fails the run (assertion_guard.h).
#include <mpi.h>

#include "engine/comm/mpi_comm.h"

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <filesystem>
#include <system_error>

#include "../unit/assertion_guard.h"
#include "../unit/temp_dir.h"

using AssertionGuard = us::test::AssertionGuard;
CATCH_REGISTER_LISTENER(AssertionGuard)

int main(int argc, char* argv[]) {
    us::MpiRuntime::init(&argc, &argv,
                         std::getenv("US_TEST_COMM_PROGRESS") ? std::getenv("US_TEST_COMM_PROGRESS") : "thread");
    Catch::Session session;
    int rc = session.applyCommandLine(argc, argv);
    if (rc == 0) rc = us::test::with_assertion_guard(session.run());
    // A rank whose test failed must fail the whole mpirun.
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    // Past the all-reduce no rank reads another's files (rank0_temp_path): a passing run removes its own folder.
    std::error_code ignored;
    if (worst == 0) std::filesystem::remove_all(us::test::test_temp_dir(), ignored);
    us::MpiRuntime::finalize();
    return worst;
}
