// Multi-host launches, checked on one machine: a hostfile of this machine runs; one naming other hosts is refused
// until the listener is on an address they can reach; bad hostfiles name their line; --launcher srun builds the
// srun command line (run here through a stand-in srun that hands it to mpirun).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

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

namespace {

double steady_step_s(const std::string& trace) {
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + trace + " --json").output);
    return j["throughput"]["step_s"].get<double>();
}

}  // namespace

TEST_CASE("ultrascope run --nodes 2: one rank a node, over the emulated link, the same losses, nothing left after",
          "[cpu][app][hosts][nodes]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) skip_test(why);
    const std::string one = temp_path("nodes-one-host.ustrace"), two = temp_path("nodes-two.ustrace"),
                      slow = temp_path("nodes-slow-link.ustrace");
    const ProcessResult local = run_process(run_tiny("--trace " + one));
    REQUIRE(local.exit_code == 0);
    const ProcessResult r = run_process(run_tiny("--nodes 2 --trace " + two));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("2 emulated nodes") != std::string::npos);
    // the links' counters against the ring formula: every byte the formula puts across the link crossed it, with
    // the frames' headers and MPI's own few messages on top
    const size_t ratio_at = r.output.find("measured / formula ");
    REQUIRE(ratio_at != std::string::npos);
    const double ratio = std::atof(r.output.c_str() + ratio_at + 19);
    CHECK(ratio >= 0.99);
    CHECK(ratio <= 1.15);
    // the last step's loss, as the progress line prints it, equals the one-host run's
    const auto last_loss = [](const std::string& out) { return out.substr(out.rfind("loss "), 11); };
    CHECK(last_loss(r.output) == last_loss(local.output));
    // rank 1 is on another host: its clock was measured by ping-pong across the link
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + two + " --json").output);
    CHECK(j["ranks"][1]["clock_uncertainty_ns"].get<int64_t>() > 0);
    // the report says the data-parallel group crosses nodes; on one host it does not
    CHECK(j["ranks"][0]["comm_hosts_by_group"]["dp"] == 2);
    const auto j1 = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + one + " --json").output);
    CHECK(j1["ranks"][0]["comm_hosts_by_group"]["dp"] == 1);
    // the ring model's split: on two nodes of one rank each, every dp byte crosses; on one host none does
    CHECK(j["ranks"][0]["comm_bytes_inter_node"]["dp"].get<double>() > 0);
    CHECK(j["ranks"][0]["comm_bytes_inter_node"]["dp"] == j["ranks"][0]["comm_bytes"]["dp"]);
    CHECK(j1["ranks"][0]["comm_bytes_inter_node"]["dp"] == 0.0);
    CHECK(run_process(bin("ultrascope") + " report " + two)
              .output.find("dp (across 2 nodes; its ring edge inter-node)") != std::string::npos);
    // the planner's comparison takes its nodes from the run's hosts: two nodes of one rank, dp between them
    CHECK(j["planner"]["hosts"].get<std::string>().rfind("2 hosts, 1 rank a host (block)", 0) == 0);
    CHECK(j1["planner"]["hosts"].get<std::string>().rfind("1 host", 0) == 0);
    // a 20 Mbit/s link makes the data-parallel all-reduce, and the step, far slower
    const ProcessResult shaped = run_process(run_tiny("--nodes 2 --inter-node-gbps 0.02 --trace " + slow));
    INFO(shaped.output);
    REQUIRE(shaped.exit_code == 0);
    CHECK(steady_step_s(slow) > 3 * steady_step_s(two));
    CHECK(stale_emulated_nodes().empty());  // every namespace (with its links and qdiscs) removed
}

TEST_CASE(
    "ultrascope run --nodes 2 --node-placement cyclic: tp crosses the link, dp stays inside, and the report "
    "and the planner say so",
    "[cpu][app][hosts][nodes]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) skip_test(why);
    const std::string trace = temp_path("nodes-cyclic.ustrace");
    const ProcessResult r =
        run_process(bin("ultrascope") + " run --nodes 2 --node-placement cyclic -n 4 --tp 2 --dp 2 " +
                    "--preset tiny --steps 3 --data " + data_file() + " --trace " + trace);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + trace + " --json").output);
    for (const auto& rank : j["ranks"]) {
        CHECK(rank["comm_hosts_by_group"]["tp"] == 2);  // rank r on node r mod 2: tp {0,1} spans both
        CHECK(rank["comm_hosts_by_group"]["dp"] == 1);  // dp {0,2} on node 0
        CHECK(rank["comm_bytes_inter_node"]["tp"] == rank["comm_bytes"]["tp"]);
        CHECK(rank["comm_bytes_inter_node"]["dp"] == 0.0);
    }
    CHECK(j["planner"]["hosts"].get<std::string>().rfind("2 hosts, 2 ranks a host (cyclic)", 0) == 0);
    CHECK(stale_emulated_nodes().empty());
}

TEST_CASE("ultrascope run --nodes: bad requests are refused before anything is made", "[cpu][app][hosts][nodes]") {
    for (const auto& [flags, says] :
         std::vector<std::pair<std::string, std::string>>{{"--nodes 3", "do not split evenly"},
                                                          {"--inter-node-gbps 1", "go with --nodes"},
                                                          {"--nodes 2 --node-placement random", "block or cyclic"},
                                                          {"--nodes 2 --hostfile /dev/null", "leave out --hostfile"}}) {
        const ProcessResult r = run_process(run_tiny(flags));
        INFO(flags << "\n" << r.output);
        CHECK(r.exit_code == 2);
        CHECK(r.output.find(says) != std::string::npos);
        CHECK(r.output.find("emulated nodes (") == std::string::npos);  // none were made
    }
}

TEST_CASE("a rank killed on one emulated node: the run ends, the rank and its node named, nothing left",
          "[cpu][app][hosts][nodes][faults]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) skip_test(why);
    const std::string trace = temp_path("nodes-killed.ustrace");
    const auto t0 = std::chrono::steady_clock::now();
    const ProcessResult r =
        run_process(run_tiny("--nodes 2 --fault-kill-rank 1 --fault-kill-step 3 --steps 8 --trace " + trace));
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));  // no rank left waiting
    CHECK(r.output.find("lost rank 1") != std::string::npos);
    CHECK(r.output.find("n1") != std::string::npos);  // Open MPI names the node it died on
    CHECK(stale_emulated_nodes().empty());
}

TEST_CASE("ultrascope calibrate --nodes measures the link between emulated nodes beside the one-host link",
          "[cpu][app][hosts][nodes][calibrate]") {
    const ProcessResult bad =
        run_process(bin("ultrascope") + " calibrate --inter-node-gbps 1 --out " + temp_path("bad-machine.json"));
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("goes with --nodes") != std::string::npos);
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) skip_test(why);
    const std::string out = temp_path("nodes-machine.json");
    const ProcessResult r = run_process(bin("ultrascope") + " calibrate --out " + out +
                                        " --tries 1 --steps 3 --repeats 3 --nodes 2 --inter-node-gbps 1");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto m = nlohmann::json::parse(read_file(out));
    CHECK(m["nodes"] == 2);
    CHECK(m["measurements"]["collectives_between_nodes"].get<int>() > 0);
    // measured through the 1 Gbit/s (125 MB/s) link: below 1 GB/s (a busy machine only slows it; the one-host link
    // is not compared, being as slow as the load makes it)
    const double across = m["inter_node"]["bandwidth"].get<double>();
    CHECK(across > 0);
    CHECK(across < 1e9);
    // the gradient buckets' bandwidth, from a data-parallel run across the link (MB-sized buckets, past the burst)
    CHECK(m["description"].get<std::string>().find("data-parallel run's gradient buckets saw") != std::string::npos);
    const double buckets = m["inter_node_bucket_bandwidth"].get<double>();
    CHECK(buckets > 0);
    CHECK(buckets < 0.2e9);
    // blocking collectives from a tensor-parallel run's all-reduces (1 MiB: past the burst, near the rate), and
    // the compute beside hidden transfers measured against the same run not overlapped
    CHECK(m["description"].get<std::string>().find("tensor-parallel run's all-reduces") != std::string::npos);
    CHECK(across < 0.2e9);
    const double slowdown = m["inter_node_overlap_slowdown"].get<double>();
    CHECK(slowdown >= 0);
    CHECK(slowdown < 1);
    CHECK(stale_emulated_nodes().empty());
}

TEST_CASE("ultrascope run --nodes without root: in a user namespace of its own, the same losses, nothing left",
          "[cpu][app][hosts][nodes]") {
    if (::geteuid() != 0) skip_test("the test runs the command as the user nobody, which needs root to switch to");
    const ProcessResult userns = run_process("runuser -u nobody -- unshare --user --map-root-user --net true");
    if (userns.exit_code != 0)
        skip_test("this system does not let an unprivileged user make a user namespace: " + userns.output);
    if (run_process("runuser -u nobody -- test -x " + bin("ultrascope")).exit_code != 0)
        skip_test("the user nobody cannot run " + bin("ultrascope") + " (a build folder only root may enter)");
    const fs::path dir = temp_path("rootless-nodes");
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::all);
    const std::string one = (dir / "one-host.ustrace").string(), two = (dir / "two-nodes.ustrace").string();
    // what other runs left in this namespace (a killed one's nodes, which only a run as root removes) is not this one's
    const std::string stale_before = stale_emulated_nodes();
    const ProcessResult local = run_process(run_tiny("--trace " + one));
    REQUIRE(local.exit_code == 0);
    const ProcessResult r =
        run_process("runuser -u nobody -- " + run_tiny("--nodes 2 --inter-node-gbps 1 --trace " + two));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("2 emulated nodes") != std::string::npos);
    const auto last_loss = [](const std::string& out) { return out.substr(out.rfind("loss "), 11); };
    CHECK(last_loss(r.output) == last_loss(local.output));
    CHECK(fs::exists(two));
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + two + " --json").output);
    CHECK(j["ranks"][0]["comm_hosts_by_group"]["dp"] == 2);
    // made inside the run's own namespaces: nothing of it in this one, before or after
    std::istringstream after(stale_emulated_nodes());
    for (std::string name; std::getline(after, name);) CHECK(stale_before.find(name) != std::string::npos);
}
