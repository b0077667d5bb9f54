// The Catch2 runner for the unit tests (Catch2 2.x or 3.x). A test case that checks nothing fails the run
// (assertion_guard.h).
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <system_error>

#include "assertion_guard.h"
#include "temp_dir.h"

using AssertionGuard = us::test::AssertionGuard;
CATCH_REGISTER_LISTENER(AssertionGuard)

int main(int argc, char* argv[]) {
    const int result = us::test::with_assertion_guard(Catch::Session().run(argc, argv));
    // A passing run leaves nothing behind (ctest runs each case as its own process: a full run left ~500 folders,
    // 1.3 GB over a day's runs); a failing one keeps its files to look at.
    std::error_code ignored;
    if (result == 0) std::filesystem::remove_all(us::test::test_temp_dir(), ignored);
    return result;
}
