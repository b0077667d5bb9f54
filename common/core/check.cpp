#include "common/core/check.h"

#include <cstdio>
#include <cstdlib>

namespace us {

void assertion_failed(const char* expr, const char* file, int line, const std::string& message) {
    std::fprintf(stderr, "ultrascope: internal error at %s:%d: assertion `%s` failed%s%s\n", file, line, expr,
                 message.empty() ? "" : ": ", message.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace us
