// Errors, in the three kinds the architecture names: bugs (always-on assertions that name file and line),
// failed library calls (check macros that name the call), and bad user input (UserError: a message that says
// what was wrong and what to do; callers turn it into a non-zero exit).
#pragma once

#include <fmt/core.h>

#include <stdexcept>
#include <string>

namespace us {

// Bad input from a user: flags, configs, data files, checkpoints, trace files, network bytes.
class UserError : public std::runtime_error {
public:
    explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& message);

template <typename... Args>
[[noreturn]] void fail_user(fmt::format_string<Args...> format, Args&&... args) {
    throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace us

// A bug if it fires: prints the condition, file, line and message, then aborts (in a multi-rank run mpirun then
// takes the other ranks down rather than leaving them hanging).
#define US_ASSERT(cond, ...)                                                                  \
    do {                                                                                      \
        if (!(cond)) [[unlikely]]                                                             \
            ::us::assertion_failed(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
    } while (0)

// User input checks: throw UserError with the formatted message.
#define US_CHECK_INPUT(cond, ...)         \
    do {                                  \
        if (!(cond)) [[unlikely]]         \
            ::us::fail_user(__VA_ARGS__); \
    } while (0)
