// A test case that checks nothing fails the run: the runners (unit/main.cpp, mpi/main.cpp) end with a non-zero
// code and name it. Catch2's `--warn NoAssertions` would do this, but 2.x takes one `--warn` only and the runs need
// `--warn NoTests` (a filter that matches nothing fails). A test that cannot run here calls skip_test(), which
// counts as a check.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "catch_compat.h"

namespace us::test {

inline std::vector<std::string>& tests_without_assertions() {
    static std::vector<std::string> names;
    return names;
}

#if __has_include(<catch2/catch_all.hpp>)
struct AssertionGuard : Catch::EventListenerBase {
    using Catch::EventListenerBase::EventListenerBase;
    void testCaseEnded(Catch::TestCaseStats const& s) override {
        if (s.totals.assertions.total() == 0) tests_without_assertions().push_back(s.testInfo->name);
    }
};
#else
struct AssertionGuard : Catch::TestEventListenerBase {
    using Catch::TestEventListenerBase::TestEventListenerBase;
    void testCaseEnded(Catch::TestCaseStats const& s) override {
        if (s.totals.assertions.total() == 0) tests_without_assertions().push_back(s.testInfo.name);
    }
};
#endif

// The session's code, or 1 when a test case ran without a single assertion.
inline int with_assertion_guard(int rc) {
    for (const std::string& name : tests_without_assertions())
        std::fprintf(stderr, "error: test case \"%s\" checked nothing (no assertion ran)\n", name.c_str());
    return rc != 0 ? rc : tests_without_assertions().empty() ? 0 : 1;
}

}  // namespace us::test
