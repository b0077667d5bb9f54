// Multi-host launches, checked on one machine: a hostfile of this machine runs; one naming other hosts is refused
// until the listener is on an address they can reach; bad hostfiles name their line; --launcher srun builds the
// srun command line (run here through a stand-in srun that hands it to mpirun).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

std::string data_file() { return sample_data_file("hosts-data.txt", 20000); }
std::string run_tiny(const std::string& flags) {
    return bin("ultrascope") + " run " + flags + " -n 2 --dp 2 --preset tiny --steps 3 --data " + data_file();
}

}  // namespace

TEST_CASE("ultrascope run --hostfile: ranks on the hostfile's hosts, streaming back", "[cpu][app][hosts]") {
    const std::string hostfile = temp_path("hosts-local.txt");
    write_file(hostfile, "# this machine only\nlocalhost slots=2\n");
    const std::string trace = temp_path("hosts-local.ustrace");
    const ProcessResult r = run_process(run_tiny("--hostfile " + hostfile + " --trace " + trace));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + trace + " --json").output);
    CHECK(j["ranks"].size() == 2);
    CHECK(j["ranks"][1]["steps"].size() == 3);
}

TEST_CASE("other hosts cannot stream to loopback: refused before launch, with what to do",
          "[cpu][app][hosts][errors]") {
    const std::string hostfile = temp_path("hosts-remote.txt");
    write_file(hostfile, "node-a slots=1\nnode-b slots=1\n");
    const std::string trace = temp_path("hosts-remote.ustrace");
    fs::remove(trace);
    const ProcessResult r = run_process(run_tiny("--hostfile " + hostfile + " --trace " + trace));
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("cannot stream to 127.0.0.1") != std::string::npos);
    CHECK(r.output.find("--listen ADDR") != std::string::npos);
    CHECK_FALSE(fs::exists(trace));  // nothing launched, nothing written

    write_file(hostfile, "node-a slots=two\n");
    const ProcessResult bad = run_process(run_tiny("--hostfile " + hostfile));
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("line 1") != std::string::npos);
    const ProcessResult missing = run_process(run_tiny("--hostfile /nonexistent/hosts"));
    CHECK(missing.exit_code != 0);
    CHECK(missing.output.find("cannot read hostfile") != std::string::npos);
    const ProcessResult launcher = run_process(run_tiny("--launcher pbs"));
    CHECK(launcher.exit_code != 0);
    CHECK(launcher.output.find("expected mpirun or srun") != std::string::npos);
}

TEST_CASE("ultrascope run --launcher srun: the srun command line, run through a stand-in srun", "[cpu][app][hosts]") {
    // The stand-in records its arguments and runs the same program through mpirun on this machine.
    const std::string fake = temp_path("fake-srun.sh"), args = temp_path("fake-srun.args");
    write_file(fake,
               "#!/bin/sh\nprintf '%s ' \"$@\" > " + args +
                   "\nn=$2\nshift 5\nexec mpirun -n $n --oversubscribe --mca btl_vader_single_copy_mechanism none "
                   "-x ULTRASCOPE_TOKEN -x ULTRASCOPE_STOP_WITH_LISTENER \"$@\"\n");
    fs::permissions(fake, fs::perms::owner_all);
    const std::string trace = temp_path("srun.ustrace");
    // Slurm places ranks on other nodes: the listener must not be this machine's 127.0.0.1 (127.0.0.2 is still
    // this machine, which lets the test run anywhere).
    const ProcessResult refused = run_process("ULTRASCOPE_SRUN=" + fake + " " + run_tiny("--launcher srun"));
    CHECK(refused.exit_code != 0);
    CHECK(refused.output.find("cannot stream to 127.0.0.1") != std::string::npos);
    const ProcessResult r =
        run_process("ULTRASCOPE_SRUN=" + fake + " " + run_tiny("--launcher srun --listen 127.0.0.2 --trace " + trace));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string used = read_file(args);
    CHECK(used.rfind("-n 2 --export=ALL --mpi=pmix --kill-on-bad-exit=1 ", 0) == 0);
    CHECK(used.find("--connect 127.0.0.2:") != std::string::npos);
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + trace + " --json").output);
    CHECK(j["ranks"].size() == 2);
}
