// Where a test process keeps its temporary files (test_util.h's temp_path): one folder per process, which the runner
// removes when every test passed (unit/main.cpp) and keeps, to look at, when one failed.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace us::test {

inline std::filesystem::path test_temp_dir() {
    return std::filesystem::temp_directory_path() / ("ultrascope-test-" + std::to_string(::getpid()));
}

}  // namespace us::test
