// `ultrascope nodes up / exec / down / status` (docs/nodes.md, "Nodes that stay up"): emulated nodes that stay up
// between commands, a command run on one, and nothing left after `down`, even when the holder was killed; then a
// torchrun job across two of them captured with `ultrascope capture --nodes` (docs/attach-pytorch.md), which needs a
// Python with torch (ULTRASCOPE_TORCH_PYTHON, else python3). Each test keeps its state in a run folder of its own
// (ULTRASCOPE_NODES_DIR), and skips itself (never passes) without root or torch.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"
#include "torch_job.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

// `ultrascope nodes ...` with the test's run folder.
struct Nodes {
    std::string dir;
    explicit Nodes(const std::string& name) : dir(temp_path(name)) { fs::remove_all(dir); }
    ~Nodes() { run("down >/dev/null 2>&1"); }  // whatever the test did, nothing stays up
    std::string env() const { return "ULTRASCOPE_NODES_DIR=" + dir + " "; }
    ProcessResult run(const std::string& args) const {
        return run_process(env() + bin("ultrascope") + " nodes " + args);
    }
    nlohmann::json state() const { return nlohmann::json::parse(read_file(dir + "/nodes.json")); }
};

std::set<std::string> namespaces_named(const std::string& prefix) {
    std::set<std::string> found;
    std::istringstream list(run_process("ip netns list").output);
    for (std::string line; std::getline(list, line);)
        if (line.rfind(prefix, 0) == 0) found.insert(line.substr(0, line.find(' ')));
    return found;
}

}  // namespace

TEST_CASE("nodes up, exec and down: two nodes that stay up, a command on each, nothing left", "[cpu][app][nodes]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) return skip_test(why);
    Nodes nodes("nodes-cli");
    const ProcessResult none = nodes.run("status");
    CHECK(none.exit_code == 0);
    CHECK(none.output.find("no emulated nodes are up") != std::string::npos);
    CHECK(nodes.run("exec 0 -- true").output.find("nodes up N") != std::string::npos);  // none up: what to do
    CHECK(nodes.run("down").exit_code != 0);

    const ProcessResult up = nodes.run("up 2 --inter-node-gbps 1");
    INFO(up.output);
    REQUIRE(up.exit_code == 0);
    const nlohmann::json state = nodes.state();
    REQUIRE(state["nodes"].size() == 2);
    const std::string holder = state["holder"].get<std::string>();
    const std::string pid = holder.substr(0, holder.find('.'));
    const std::string node0 = state["nodes"][0]["name"], node1 = state["nodes"][1]["name"];
    CHECK(namespaces_named("us" + pid + "n").size() == 2);
    CHECK(nodes.run("status").output.find(state["nodes"][1]["address"].get<std::string>()) != std::string::npos);

    // A command on each node sees that node's name and address, node 0's as MASTER_ADDR; its exit code comes back.
    const ProcessResult on1 = nodes.run("exec 1 -- sh -c 'hostname; echo $ULTRASCOPE_NODE_ADDRESS $MASTER_ADDR'");
    INFO(on1.output);
    CHECK(on1.exit_code == 0);
    CHECK(on1.output == node1 + "\n" + state["nodes"][1]["address"].get<std::string>() + " " +
                            state["nodes"][0]["address"].get<std::string>() + "\n");
    CHECK(nodes.run("exec 0 hostname").output == node0 + "\n");
    CHECK(nodes.run("exec 0 -- sh -c 'exit 7'").exit_code == 7);
    CHECK(nodes.run("exec 1 -- no-such-command-here").exit_code == 127);
    // node 1 reaches node 0 over the bridge
    CHECK(nodes
              .run("exec 1 -- python3 -c 'import socket; socket.create_connection((\"" +
                   state["nodes"][0]["address"].get<std::string>() + "\", 7321), 2)'")
              .exit_code == 0);  // node 0's agent

    // Bad input: changes nothing.
    const ProcessResult again = nodes.run("up 2");
    CHECK(again.exit_code != 0);
    CHECK(again.output.find("already up") != std::string::npos);
    const ProcessResult out_of_range = nodes.run("exec 2 -- true");
    CHECK(out_of_range.exit_code != 0);
    CHECK(out_of_range.output.find("no node 2") != std::string::npos);
    CHECK(nodes.run("exec x -- true").exit_code != 0);
    CHECK(nodes.run("up 1").output.find("2 to 64") != std::string::npos);
    if (run_process("runuser -u nobody -- test -x " + bin("ultrascope")).exit_code == 0) {
        const ProcessResult nobody = run_process("runuser -u nobody -- env ULTRASCOPE_NODES_DIR=/tmp/nobody-nodes " +
                                                 bin("ultrascope") + " nodes up 2");
        CHECK(nobody.exit_code != 0);
        CHECK(nobody.output.find("needs root") != std::string::npos);
    }
    CHECK(nodes.state() == state);

    // An exec interrupted ends its command's whole tree.
    const std::string marker = "sleep 3" + pid.substr(pid.size() - 2) + "7";
    run_process(nodes.env() + bin("ultrascope") + " nodes exec 0 -- sh -c '" + marker + " & " + marker +
                "' >/dev/null 2>&1 & echo $! > " + nodes.dir + "-exec.pid");
    for (int i = 0; i < 50 && processes_matching(marker) < 2; ++i) usleep(100000);
    CHECK(processes_matching(marker) >= 2);
    ::kill(std::atoi(read_file(nodes.dir + "-exec.pid").c_str()), SIGTERM);
    CHECK(wait_processes_gone(marker, 10) == 0);

    // A command still running on a node when the nodes go down is ended with them.
    run_process(nodes.env() + bin("ultrascope") + " nodes exec 1 -- " + marker + " >/dev/null 2>&1 &");
    for (int i = 0; i < 50 && processes_matching(marker) < 1; ++i) usleep(100000);
    const ProcessResult down = nodes.run("down");
    INFO(down.output);
    CHECK(down.exit_code == 0);
    CHECK(down.output.find("took down 2") != std::string::npos);
    CHECK(namespaces_named("us" + pid + "n").empty());
    CHECK(wait_processes_gone(marker, 5) == 0);
    // the holder ended (a zombie at most, where this container's init reaps no orphans)
    CHECK(run_process("test ! -e /proc/" + pid + " || grep -q '^[0-9]* ([^)]*) Z' /proc/" + pid + "/stat").exit_code ==
          0);
    CHECK_FALSE(fs::exists(nodes.dir));  // state file, logs, lock: all gone
    CHECK(nodes.run("status").output.find("no emulated nodes are up") != std::string::npos);
}

TEST_CASE("nodes whose holder was killed are removed by the next nodes command", "[cpu][app][nodes]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) return skip_test(why);
    Nodes nodes("nodes-killed");
    REQUIRE(nodes.run("up 2").exit_code == 0);
    const std::string holder = nodes.state()["holder"].get<std::string>();
    const std::string pid = holder.substr(0, holder.find('.'));
    run_process(nodes.env() + bin("ultrascope") + " nodes exec 0 -- sleep 3217 >/dev/null 2>&1 &");
    for (int i = 0; i < 50 && processes_matching("sleep 3217") < 1; ++i) usleep(100000);
    ::kill(std::atoi(pid.c_str()), SIGKILL);
    usleep(300000);
    CHECK(namespaces_named("us" + pid + "n").size() == 2);  // left behind, until the next command
    const ProcessResult status = nodes.run("status");
    INFO(status.output);
    CHECK(status.output.find("no longer ran") != std::string::npos);
    CHECK(status.output.find("no emulated nodes are up") != std::string::npos);
    CHECK(namespaces_named("us" + pid + "n").empty());
    CHECK(wait_processes_gone("sleep 3217", 5) == 0);
    CHECK_FALSE(fs::exists(nodes.dir));
    CHECK(wait_processes_gone("agent --listen 0.0.0.0 --port 7321", 5) == 0);
}

TEST_CASE("capture --nodes: a torchrun job across two emulated nodes, every rank of both, the same steps",
          "[cpu][capture][nodes]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) return skip_test(why);
    const std::string python = python_with_torch();
    if (python.empty()) return skip_test("no Python with torch (set ULTRASCOPE_TORCH_PYTHON to one)");
    Nodes nodes("nodes-capture");
    const std::string work = temp_path("nodes-capture-work");
    fs::remove_all(work);
    fs::create_directories(work);
    const ProcessResult up = nodes.run("up 2");
    INFO(up.output);
    REQUIRE(up.exit_code == 0);
    const nlohmann::json state = nodes.state();
    const std::string holder = state["holder"].get<std::string>();
    const std::string pid = holder.substr(0, holder.find('.'));
    write_file(work + "/kineto.conf", "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n");
    const std::string job_script = std::string(US_TEST_DATA_DIR) + "/capture_protocol/ddp_job.py";
    // One torchrun a node, rendezvous at node 0 over the bridge (MASTER_ADDR from nodes exec), 2 ranks each.
    for (int k = 0; k < 2; ++k)
        run_process("KINETO_USE_DAEMON=1 KINETO_CONFIG=" + work + "/kineto.conf OMP_NUM_THREADS=1 " + nodes.env() +
                    bin("ultrascope") + " nodes exec " + std::to_string(k) + " -- " + python +
                    " -m torch.distributed.run --nnodes 2 --node-rank " + std::to_string(k) +
                    " --nproc-per-node 2 --master-port 29571 " + job_script + " --seconds 200 > " + work + "/job" +
                    std::to_string(k) + ".log 2>&1 &");
    const std::string out = work + "/captured";
    const ProcessResult capture = run_process(nodes.env() + bin("ultrascope") + " capture --nodes 2 --steps 3 --out " +
                                              out + " --timeout 150 --roundup 20");
    INFO(capture.output << "\njob logs:\n" << read_file(work + "/job0.log") << read_file(work + "/job1.log"));
    REQUIRE(capture.exit_code == 0);
    const ProcessResult report = run_process(bin("ultrascope") + " report " + out + " --json");
    INFO(report.output);
    REQUIRE(report.exit_code == 0);
    const auto j = nlohmann::json::parse(report.output);
    CHECK(j["run"]["world_size"] == 4);
    REQUIRE(j["ranks"].size() == 4);
    std::set<std::string> hosts;
    for (const auto& f : fs::directory_iterator(out)) {
        const std::string name = f.path().filename().string();  // rank<R>.<host>.pt.trace.json
        if (f.path().extension() == ".json")
            hosts.insert(name.substr(name.find('.') + 1, name.find(".pt.") - name.find('.') - 1));
    }
    CHECK(hosts == std::set<std::string>{state["nodes"][0]["name"], state["nodes"][1]["name"]});
    for (const auto& r : j["ranks"]) {  // every rank the same 3 steps, on clocks that agree (one machine's)
        CHECK(r["steps"].size() == 3);
        const auto& offset = r["clock_offset_ns"];
        CHECK((offset.is_null() || std::abs(offset.get<double>()) < 5e6));
    }
    // --nodes with another count, or beside --agents, is refused
    CHECK(run_process(nodes.env() + bin("ultrascope") + " capture --nodes 3 --steps 1 --out " + work + "/x")
              .output.find("2 emulated node(s) are up") != std::string::npos);
    // down ends the job on both nodes and leaves nothing
    const ProcessResult down = nodes.run("down");
    CHECK(down.exit_code == 0);
    CHECK(namespaces_named("us" + pid + "n").empty());
    CHECK(wait_processes_gone(job_script, 10) == 0);
    CHECK(wait_processes_gone("agent --listen 0.0.0.0 --port 7321", 5) == 0);
    CHECK_FALSE(fs::exists(nodes.dir));
}
