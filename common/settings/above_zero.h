// A command-line check for a number that must be above zero (--microbatches, --threads, --store-cap-mib,
// --progress-timeout): the message names the flag's value and the rule, where CLI11's PositiveNumber prints its
// range ("Value 0 not in range 0.000000 to 1.797693e+308").
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace us {

inline CLI::Validator above_zero() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            double v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return "expected a number, got '" + text + "'";
            return v > 0 ? std::string() : "expected a number above 0, got " + text;
        },
        "NUMBER > 0");
}

}  // namespace us
