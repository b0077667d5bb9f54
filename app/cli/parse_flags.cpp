// A command's flags parsed the one way (parse_flags.h).
#include "app/cli/parse_flags.h"

#include "common/core/check.h"

namespace us::app {

std::optional<int> parse_flags(CLI::App& cli, int argc, char** argv, const char* command) {
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return cli.exit(e);  // --help: CLI11 prints it
        fail_user("{} (see ultrascope {} --help)", e.what(), command);
    }
    return std::nullopt;
}

}  // namespace us::app
