// Catch2 2.x (Debian 12, Ubuntu 22.04) and 3.x (Ubuntu 24.04) spell their headers differently; the tests are
// written against the common subset.
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
