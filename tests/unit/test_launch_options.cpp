// The launch flags' one owner (app/launch/launch_options.h): `ultrascope run`, the GUI and `ultrascope calibrate`
// declare them through it, each its own subset, and one set of rules checks them all.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "app/launch/launch_options.h"
#include "common/core/check.h"
#include "test_util.h"

using namespace us::app;

namespace {

// Parses `args` as `command` would (its launch flags only); returns the error, or "" when they are accepted.
std::string error_of(LaunchCommand command, std::vector<std::string> args, LaunchOptions* out = nullptr) {
    CLI::App cli;
    LaunchOptions o;
    add_launch_flags(cli, o, command);
    std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
    try {
        cli.parse(args);
        check_launch_flags(cli, o);
    } catch (const CLI::ParseError& e) {
        return e.what();
    } catch (const us::UserError& e) {
        return e.what();
    }
    if (out) *out = o;
    return "";
}

bool declares(LaunchCommand command, const std::string& flag) {
    CLI::App cli;
    LaunchOptions o;
    add_launch_flags(cli, o, command);
    return cli.get_option_no_throw(flag) != nullptr;
}

std::string validate_error(const LaunchOptions& o) {
    try {
        validate(o);
    } catch (const us::UserError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("each command declares its launch flags through the one owner, under their names", "[cpu][app]") {
    for (const char* f : {"-n", "--ranks", "--listen", "--mpirun", "--hostfile", "--launcher", "--nodes",
                          "--inter-node-gbps", "--inter-node-latency-us", "--node-placement"})
        CHECK(declares(LaunchCommand::run, f));
    for (const char* f :
         {"-n", "--ranks", "--stream-listen", "--hostfile", "--launcher", "--nodes", "--inter-node-gbps"})
        CHECK(declares(LaunchCommand::gui, f));
    CHECK_FALSE(declares(LaunchCommand::gui, "--node-placement"));
    CHECK(declares(LaunchCommand::calibrate, "--nodes"));
    CHECK(declares(LaunchCommand::calibrate, "--inter-node-gbps"));
    CHECK_FALSE(declares(LaunchCommand::calibrate, "--ranks"));  // calibrate's own: the ranks of its measured runs

    LaunchOptions o;
    CHECK(error_of(LaunchCommand::run,
                   {"-n", "4", "--nodes", "2", "--inter-node-gbps", "0.5", "--node-placement", "cyclic", "--listen",
                    "0.0.0.0"},
                   &o) == "");
    CHECK(o.ranks == 4);
    CHECK(o.hosts.nodes.count == 2);
    CHECK(o.hosts.nodes.inter_node_gbps == 0.5);
    CHECK(o.hosts.nodes.placement == "cyclic");
    CHECK(o.hosts.stream_listen == "0.0.0.0");
    CHECK(validate_error(o) == "");
}

TEST_CASE("the launch flags' rules are the same for every command that has the flag", "[cpu][app]") {
    for (const LaunchCommand command : {LaunchCommand::run, LaunchCommand::gui, LaunchCommand::calibrate}) {
        const std::string alone = error_of(command, {"--inter-node-gbps", "1"});
        CHECK_THAT(alone,
                   Catch::Matchers::Contains("goes with --nodes") && Catch::Matchers::Contains("go with --nodes"));
        CHECK_THAT(error_of(command, {"--nodes", "1"}), Catch::Matchers::Contains("--nodes must be 2 to 64"));
        CHECK_THAT(error_of(command, {"--nodes", "65"}), Catch::Matchers::Contains("--nodes must be 2 to 64"));
        CHECK_THAT(error_of(command, {"--nodes", "2", "--inter-node-gbps", "-1"}),
                   Catch::Matchers::Contains("must not be negative"));
        CHECK(error_of(command, {"--nodes", "0"}) == "");  // none
    }
    CHECK_THAT(error_of(LaunchCommand::run, {"--launcher", "pbs"}),
               Catch::Matchers::Contains("expected mpirun or srun"));
    CHECK_THAT(error_of(LaunchCommand::gui, {"--launcher", "pbs"}),
               Catch::Matchers::Contains("expected mpirun or srun"));
    CHECK_THAT(error_of(LaunchCommand::run, {"--nodes", "2", "--node-placement", "random"}),
               Catch::Matchers::Contains("block or cyclic"));
    CHECK_THAT(error_of(LaunchCommand::run, {"-n", "0"}), Catch::Matchers::Contains("ranks"));
}

TEST_CASE("before a launch the options are checked together", "[cpu][app]") {
    LaunchOptions o;
    o.ranks = 2;
    o.hosts.nodes.count = 3;
    CHECK_THAT(validate_error(o), Catch::Matchers::Contains("do not split evenly"));
    o.hosts.nodes.count = 2;
    CHECK(validate_error(o) == "");
    o.hosts.hostfile = "/dev/null";
    CHECK_THAT(validate_error(o), Catch::Matchers::Contains("leave out --hostfile"));
    o.hosts.nodes.count = 0;
    o.hosts.launcher = "srun";
    CHECK_THAT(validate_error(o), Catch::Matchers::Contains("--hostfile goes with --launcher mpirun"));
    o.hosts.hostfile.clear();
    CHECK(validate_error(o) == "");
    o.ranks = 2000;
    CHECK_THAT(validate_error(o), Catch::Matchers::Contains("between 1 and 1024"));
    LaunchOptions panel;  // the launch panel keeps the links' values while nodes are off: nothing to refuse
    panel.hosts.nodes.count = 0;
    panel.hosts.nodes.inter_node_gbps = 5;
    CHECK(validate_error(panel) == "");
}
