// How every `ultrascope` command reads its flags: --help prints the help and the command exits 0; a flag CLI11
// refuses (unknown, missing, out of range) is a UserError, so that it reads "ultrascope: error: ... (see
// ultrascope report --help)" and exits 2, like every other bad input (CLI11's own codes were 105-109).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace us::app {

// Nothing when the flags parsed; else the exit code to return now (the help was printed).
std::optional<int> parse_flags(CLI::App& cli, int argc, char** argv, const char* command);

}  // namespace us::app

#define US_PARSE_FLAGS(cli, argc, argv, command)                                                                  \
    do {                                                                                                          \
        if (const std::optional<int> us_exit = ::us::app::parse_flags(cli, argc, argv, command)) return *us_exit; \
    } while (0)
