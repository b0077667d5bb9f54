// Launches never hang silently, and what a killed one leaves is cleaned up by the next: a calibration whose rank stops
// and a run whose launch never starts are ended at their progress deadline with the message, their whole process tree
// with them; a run on emulated nodes killed with SIGKILL (its tree stuck) leaves nodes, a folder and processes that
// the next run removes, saying so, as root or not. Every launched process carries its launcher's mark
// (ULTRASCOPE_LAUNCH_OWNER), so the checks see only this test's processes.
#include <dirent.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

struct Launched {
    pid_t pid;
    std::string name;
};

// The processes whose environment marks them as launched by `owner` (app/launch/process_tree.h).
std::vector<Launched> launched_by(pid_t owner) {
    const std::string mark = "ULTRASCOPE_LAUNCH_OWNER=" + std::to_string(owner) + ".";
    std::vector<Launched> found;
    DIR* d = ::opendir("/proc");
    REQUIRE(d != nullptr);
    while (const dirent* e = ::readdir(d)) {
        const pid_t pid = pid_t(std::atol(e->d_name));
        if (pid <= 0) continue;
        std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
        for (std::string var; std::getline(env, var, '\0');)
            if (var.rfind(mark, 0) == 0) {
                std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
                std::string name;
                std::getline(comm, name);
                std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
                std::string text;
                std::getline(stat, text);
                if (text.find(") Z") == std::string::npos) found.push_back({pid, name});
                break;
            }
    }
    ::closedir(d);
    return found;
}

std::string names(const std::vector<Launched>& processes) {
    std::string s;
    for (const auto& p : processes) s += p.name + "(" + std::to_string(p.pid) + ") ";
    return s;
}

// Waits up to `seconds` for a process named `name` launched by `owner`; its pid, or 0.
pid_t wait_launched(pid_t owner, const std::string& name, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        for (const Launched& p : launched_by(owner))
            if (p.name == name) return p.pid;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
}

// Waits up to `seconds` for the file to hold at least `bytes`.
bool wait_file_size(const std::string& path, uintmax_t bytes, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::error_code ec;
    while (std::chrono::steady_clock::now() < end) {
        if (fs::file_size(path, ec) >= bytes && !ec) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

// The nodes' folders a run of `pid` made (app/launch/stale_runs.h: /tmp/ultrascope-nodes-us<pid>-XXXXXX).
int nodes_folders_of(pid_t pid) {
    const std::string prefix = "ultrascope-nodes-us" + std::to_string(pid) + "-";
    int n = 0;
    for (const auto& e : fs::directory_iterator("/tmp")) n += e.path().filename().string().rfind(prefix, 0) == 0;
    return n;
}

std::string tiny_run(const std::string& data, const std::string& flags) {
    return bin("ultrascope") + " run -n 2 --dp 2 --preset tiny --data " + data + " " + flags;
}

}  // namespace

TEST_CASE("a calibration whose rank stops making progress is ended at its deadline, with the message, nothing left",
          "[cpu][app][lifetime][deadline]") {
    const auto t0 = std::chrono::steady_clock::now();
    BackgroundProcess calibrate(bin("ultrascope") + " calibrate --ranks 2 --tries 1 --steps 3 --repeats 100 " +
                                    "--progress-timeout 5 --out " + temp_path("deadline-machine.json"),
                                temp_path("deadline-calibrate.log"));
    // a rank of the collective benchmark stops (as one waiting for memory does): the other waits for it for ever
    const pid_t rank = wait_launched(calibrate.pid(), "bench_collectiv", 60);
    INFO(calibrate.output());
    REQUIRE(rank > 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(rank, SIGSTOP);
    const std::optional<int> code = calibrate.wait_exit(40);
    INFO(calibrate.output());
    REQUIRE(code.has_value());
    CHECK(*code != 0);
    const std::string out = calibrate.output();
    CHECK(out.find("bench_collectives made no progress for") != std::string::npos);
    CHECK(out.find("(its deadline: 5 s): nothing since ") != std::string::npos);
    CHECK(out.find("Ended it and every process it started") != std::string::npos);
    CHECK(out.find("--progress-timeout S") != std::string::npos);
    // what each process was doing when it was ended: the rank that stopped shows
    CHECK(out.find("Its processes then: mpirun ") != std::string::npos);
    CHECK(out.find("bench_collectiv " + std::to_string(rank) + " stopped") != std::string::npos);
    CHECK(launched_by(calibrate.pid()).empty());  // mpirun, both ranks (the stopped one too)
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("a run whose launch never starts is ended at its start-up deadline, its whole process tree with it",
          "[cpu][app][lifetime][deadline]") {
    // An mpirun whose daemons never come up (an agent that hangs, a node out of memory): it says one line, starts a
    // process of its own and waits for ever.
    const std::string fake = temp_path("deadline-stuck-mpirun.sh");
    write_file(fake, "#!/bin/sh\necho 'stuck mpirun: launching the daemons'\nsleep 300 &\nexec sleep 301\n");
    fs::permissions(fake, fs::perms::owner_all);
    const std::string data = sample_data_file("deadline-data.txt", 20000);
    const auto t0 = std::chrono::steady_clock::now();
    BackgroundProcess run(tiny_run(data, "--steps 3 --progress-timeout 3 --mpirun " + fake + " --trace " +
                                             temp_path("deadline-never.ustrace")),
                          temp_path("deadline-never.log"));
    REQUIRE(wait_launched(run.pid(), "sleep", 30) > 0);
    const std::optional<int> code = run.wait_exit(30);
    INFO(run.output());
    REQUIRE(code.has_value());
    CHECK(*code != 0);
    const std::string out = run.output();
    CHECK(out.find("the run's start (the launch, its ranks connecting, their first step) made no progress for") !=
          std::string::npos);
    CHECK(out.find("its last sign of progress: 'stuck mpirun: launching the daemons'") != std::string::npos);
    CHECK(out.find("--progress-timeout S") != std::string::npos);
    CHECK(launched_by(run.pid()).empty());  // the script and both sleeps
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(25));
}

namespace {

// An mpirun stuck for good: it starts a process on each emulated node through the launch agent, as mpirun starts its
// daemons, then ignores every stop signal (the kernel's SIGTERM when its launcher dies included) and waits.
std::string stuck_mpirun(const fs::path& dir) {
    const std::string path = (dir / "stuck-mpirun.sh").string();
    write_file(path,
               "#!/bin/sh\ntrap '' TERM HUP INT\n"
               "while [ $# -gt 0 ]; do case \"$1\" in --hostfile) hosts=$2;; plm_rsh_agent) agent=$2;; esac; shift; "
               "done\n"
               "for node in $(cut -d' ' -f1 \"$hosts\"); do \"$agent\" \"$node\" sleep 600 & done\n"
               "echo 'stuck mpirun: daemons started'\nwait\n");
    fs::permissions(path, fs::perms::all);
    return path;
}

// The ultrascope process of a command started as `as` ("runuser -u nobody -- " starts it as its child).
pid_t ultrascope_of(const BackgroundProcess& p, const std::string& as) {
    if (as.empty()) return p.pid();
    return pid_t(std::atol(run_process("pgrep -P " + std::to_string(p.pid()) + " -x ultrascope").output.c_str()));
}

// Two runs on emulated nodes killed with SIGKILL in the middle, run as `as`: one training, which leaves its nodes'
// names (as root) and folder; one whose mpirun is stuck, which leaves processes too, in its nodes and beside. Each
// following run removes what the one before left, says so, and the last one trains.
// The cases that call this are [serial] (e2e_serial, alone): every launch on the machine ends what killed launches
// left, so a launch of a test beside them (seen: the other of the two, as root) could end the stuck run's processes
// before the next run here, which then has nothing to say.
void check_killed_runs_cleaned_up(const std::string& as, const fs::path& dir) {
    const bool root = as.empty();
    const std::string data = (dir / "data.txt").string();
    fs::copy_file(sample_data_file("deadline-nodes-data.txt", 20000), data, fs::copy_options::overwrite_existing);
    fs::permissions(data, fs::perms::all);
    const std::string trace = (dir / "killed.ustrace").string();
    BackgroundProcess training(as + tiny_run(data, "--nodes 2 --steps 100000 --trace " + trace),
                               (dir / "killed.log").string());
    REQUIRE(wait_file_size(trace, 20000, 60));
    const pid_t first = ultrascope_of(training, as);
    REQUIRE(first > 0);
    ::kill(first, SIGKILL);
    REQUIRE(training.wait_exit(10).has_value());
    INFO(training.output());
    CHECK(nodes_folders_of(first) == 1);  // what it left
    if (root) CHECK(run_process("ip netns list").output.find("us" + std::to_string(first) + "n0") != std::string::npos);

    BackgroundProcess stuck(as + tiny_run(data, "--nodes 2 --steps 3 --mpirun " + stuck_mpirun(dir) + " --trace " +
                                                    (dir / "stuck.ustrace").string()),
                            (dir / "stuck.log").string());
    REQUIRE(stuck.wait_for_output("stuck mpirun: daemons started", 30));
    const pid_t second = ultrascope_of(stuck, as);
    REQUIRE(second > 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the sleeps on the nodes
    INFO(stuck.output());
    CHECK(stuck.output().find("removed what a killed run (pid " + std::to_string(first) +
                              ", no longer running) left:") != std::string::npos);
    CHECK(nodes_folders_of(first) == 0);
    ::kill(second, SIGKILL);
    REQUIRE(stuck.wait_exit(10).has_value());
    REQUIRE(launched_by(second).size() >= 3);  // the stuck mpirun and a process on each node stay

    const ProcessResult next =
        run_process(as + tiny_run(data, "--nodes 2 --steps 3 --trace " + (dir / "next.ustrace").string()));
    INFO(next.output);
    CHECK(next.exit_code == 0);
    CHECK(next.output.find("a killed launch (pid " + std::to_string(second) + ", no longer running) left running:") !=
          std::string::npos);
    const std::string prefix = "us" + std::to_string(second);
    CHECK(next.output.find("removed what a killed run (pid " + std::to_string(second) + ", no longer running) left:") !=
          std::string::npos);
    if (root) CHECK(next.output.find("its nodes " + prefix + "n0 " + prefix + "n1;") != std::string::npos);
    INFO(names(launched_by(second)));
    CHECK(launched_by(second).empty());
    CHECK(nodes_folders_of(second) == 0);
    CHECK(run_process("ip -o link show; ip netns list").output.find(prefix) == std::string::npos);
}

}  // namespace

TEST_CASE("runs on emulated nodes killed with SIGKILL: the next run removes what each left, says so, and runs",
          "[cpu][app][hosts][nodes][deadline][serial]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) {
        skip_test(why);
        return;
    }
    const fs::path dir = temp_path("deadline-killed-nodes");
    fs::remove_all(dir);
    fs::create_directories(dir);
    check_killed_runs_cleaned_up("", dir);
    CHECK(stale_emulated_nodes().empty());
}

TEST_CASE("runs without root on emulated nodes killed with SIGKILL: the next one removes what each left, and runs",
          "[cpu][app][hosts][nodes][deadline][serial]") {
    if (::geteuid() != 0) {
        skip_test("the test runs the command as the user nobody, which needs root to switch to");
        return;
    }
    if (const ProcessResult u = run_process("runuser -u nobody -- unshare --user --map-root-user --net true");
        u.exit_code != 0) {
        skip_test("this system does not let an unprivileged user make a user namespace: " + u.output);
        return;
    }
    if (run_process("runuser -u nobody -- test -x " + bin("ultrascope")).exit_code != 0) {
        skip_test("the user nobody cannot run " + bin("ultrascope") + " (a build folder only root may enter)");
        return;
    }
    const fs::path dir = temp_path("deadline-rootless");
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::all);
    check_killed_runs_cleaned_up("runuser -u nobody -- ", dir);
}
