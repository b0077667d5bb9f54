// The Catch2 runner for the unit tests (Catch2 2.x or 3.x). A test case that checks nothing fails the run
// (assertion_guard.h).
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include "assertion_guard.h"

using AssertionGuard = us::test::AssertionGuard;
CATCH_REGISTER_LISTENER(AssertionGuard)

int main(int argc, char* argv[]) { return us::test::with_assertion_guard(Catch::Session().run(argc, argv)); }
