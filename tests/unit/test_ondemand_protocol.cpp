// Kineto's daemon protocol as Ultrascope reads it: the datagram codec (every malformed byte string refused with a
// reason), the registry of polling processes (launchers never taken for ranks, jobs named), the config a capture
// sends, and the daemon answering a fake Kineto through a real socket in a directory of the test's own.
#include <unistd.h>

#include <cstring>

#include "profiler/ondemand/ipc_message.h"
#include "profiler/ondemand/ondemand_daemon.h"
#include "profiler/ondemand/poller_registry.h"
#include "profiler/ondemand/process_info.h"
#include "profiler/ondemand/trace_request.h"
#include "test_util.h"

using namespace us::prof;

namespace {

IpcMessage decode_ok(const std::string& bytes) {
    IpcMessage m;
    std::string why;
    INFO(why);
    REQUIRE(decode_ipc_message(bytes.data(), bytes.size(), m, why));
    return m;
}

std::string refusal(const std::string& bytes) {
    IpcMessage m;
    std::string why;
    CHECK_FALSE(decode_ipc_message(bytes.data(), bytes.size(), m, why));
    CHECK_FALSE(why.empty());
    return why;
}

// Ranks 0 and 1 under torchrun (pid 100), which runs under a shell (pid 50).
ProcessInfo fake_info(int pid) {
    ProcessInfo info;
    info.readable = true;
    if (pid == 101 || pid == 102) {
        info.rank = pid - 101;
        info.world_size = 2;
        info.local_rank = pid - 101;
        info.local_world_size = 2;
    }
    return info;
}

IpcPoll poll_of(std::vector<int32_t> pids, int64_t jobid = 0) { return IpcPoll{2, jobid, std::move(pids)}; }

}  // namespace

TEST_CASE("Kineto's poll and registration datagrams round-trip byte for byte", "[capture]") {
    const IpcPoll poll{2, 4242, {101, 100, 50, 1}};
    const std::string bytes = encode_ipc_poll(poll);
    CHECK(bytes.size() == 40 + 16 + 4 * 4);
    CHECK(std::string(bytes.data() + 8) == "req");
    const IpcMessage m = decode_ok(bytes);
    REQUIRE(m.poll);
    CHECK(m.poll->config_type == 2);
    CHECK(m.poll->jobid == 4242);
    CHECK(m.poll->pids == poll.pids);
    const IpcMessage r = decode_ok(encode_ipc_register({0, 101, 0}));
    REQUIRE(r.reg);
    CHECK(r.reg->pid == 101);
    std::string why;
    const auto text = decode_ipc_config_reply(encode_ipc_config_reply("A=1\n").data(), 44, why);
    REQUIRE(text);
    CHECK(*text == "A=1\n");
    const std::string empty = encode_ipc_config_reply("");
    CHECK(empty.size() == 40);
    CHECK(decode_ipc_config_reply(empty.data(), empty.size(), why) == std::string());
}

TEST_CASE("malformed datagrams are refused with a reason, never read past their end", "[capture]") {
    const std::string good = encode_ipc_poll({2, 0, {101, 100}});
    CHECK(refusal("").find("shorter than the 40-byte header") != std::string::npos);
    CHECK(refusal(good.substr(0, 39)).find("header") != std::string::npos);
    CHECK(refusal(good.substr(0, good.size() - 1)).find("payload bytes") != std::string::npos);
    CHECK(refusal(good + "x").find("payload bytes") != std::string::npos);
    std::string no_nul = good;
    std::memset(no_nul.data() + 8, 'a', 32);
    CHECK(refusal(no_nul).find("NUL") != std::string::npos);
    std::string other = good;
    std::memcpy(other.data() + 8, "hello", 6);
    CHECK(refusal(other).find("unknown message type 'hello'") != std::string::npos);
    std::string lying_n = good;
    const int32_t n = 1000;
    std::memcpy(lying_n.data() + 44, &n, 4);
    CHECK(refusal(lying_n).find("a poll of 1000 processes") != std::string::npos);
    std::string negative_n = good;
    const int32_t minus = -5;
    std::memcpy(negative_n.data() + 44, &minus, 4);
    CHECK(refusal(negative_n).find("names -5 processes") != std::string::npos);
    CHECK(refusal(encode_ipc_poll({2, 0, {101, 0}})).find("process id 0") != std::string::npos);
    CHECK(refusal(encode_ipc_register({0, -1, 0})).find("process id -1") != std::string::npos);
    CHECK(refusal(std::string(70000, '\0')).find("more than any Kineto message") != std::string::npos);
    // A header whose size field is huge: the comparison with what arrived refuses it.
    std::string huge = good;
    const uint64_t big = ~uint64_t(0);
    std::memcpy(huge.data(), &big, 8);
    CHECK(refusal(huge).find("payload bytes") != std::string::npos);
}

TEST_CASE("the registry tells torchrun's agent from the ranks and groups them into one job", "[capture]") {
    PollerRegistry registry(fake_info, [](int) { return true; });
    registry.observe(poll_of({100, 50, 1}), 0.0);  // the agent polls first: alone, it looks like a lone process
    registry.observe(poll_of({101, 100, 50, 1}), 0.5);
    registry.observe(poll_of({102, 100, 50, 1}), 0.7);
    const std::vector<PolledJob> jobs = registry.jobs();
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].id == "100");
    REQUIRE(jobs[0].ranks.size() == 2);
    CHECK(jobs[0].ranks[0].pid == 101);
    CHECK(jobs[0].ranks[1].info.rank == 1);
    REQUIRE(jobs[0].launchers.size() == 1);
    CHECK(jobs[0].launchers[0].pid == 100);
    CHECK(jobs[0].expected_ranks == 2);
    CHECK(jobs[0].describe() == "job 100: 2 of 2 ranks (0, 1), launcher 100");
    std::string error;
    CHECK(pick_job(jobs, "", error) == &jobs[0]);
    CHECK(pick_job(jobs, "100", error) == &jobs[0]);
    CHECK(pick_job(jobs, "7", error) == nullptr);
    CHECK(error.find("no job 7 polls this node") != std::string::npos);
    CHECK(error.find("job 100: 2 of 2 ranks") != std::string::npos);
}

TEST_CASE("a launcher seen after its ranks, Slurm job ids and a second job are told apart", "[capture]") {
    PollerRegistry registry(fake_info, [](int pid) { return pid != 102; });
    registry.observe(poll_of({101, 100, 50}), 0);
    registry.observe(poll_of({100, 50}), 1);  // the agent after its rank: still a launcher
    registry.observe(poll_of({300, 299}, 777), 1);
    registry.observe(poll_of({102, 100, 50}), 2);
    registry.refresh(3);
    std::vector<PolledJob> jobs = registry.jobs();
    REQUIRE(jobs.size() == 2);
    CHECK(jobs[0].id == "100");
    CHECK(jobs[0].launchers.size() == 1);
    CHECK(jobs[0].ranks.size() == 2);
    CHECK_FALSE(jobs[0].ranks[1].alive);  // 102 exited
    CHECK(jobs[1].id == "777");
    CHECK(jobs[1].expected_ranks == 1);
    std::string error;
    CHECK(pick_job(jobs, "", error) == nullptr);
    CHECK(error.find("2 jobs poll this node: name one with --job ID") != std::string::npos);
    registry.refresh(100, 60);  // unseen for longer than a minute: forgotten
    CHECK(registry.jobs().empty());
    CHECK(pick_job({}, "", error) == nullptr);
    CHECK(error == "no PyTorch job polls this node");
}

TEST_CASE("the capture's config asks for N steps from a rounded-up start and names a file per pid", "[capture]") {
    const TraceRequest request{3, 50, "t1"};
    const std::string base = trace_request_base(request, "");
    CHECK(base == "/tmp/ultrascope-t1.json");
    CHECK(trace_request_base(request, "/scratch/traces/") == "/scratch/traces/ultrascope-t1.json");
    CHECK(trace_request_file(base, 4242) == "/tmp/ultrascope-t1_4242.json");
    const std::string config = trace_request_config(request, base);
    for (const char* line :
         {"ACTIVITIES_LOG_FILE=/tmp/ultrascope-t1.json\n", "PROFILE_START_ITERATION=0\n",
          "PROFILE_START_ITERATION_ROUNDUP=50\n", "ACTIVITIES_ITERATIONS=3\n", "ACTIVITIES_DURATION_MSECS=0\n"})
        CHECK(config.find(line) != std::string::npos);
    CHECK(new_capture_tag() != new_capture_tag());
}

TEST_CASE("a rank's environment gives its rank, world size and local rank", "[capture]") {
    const std::string block = std::string("PATH=/bin\0RANK=3\0WORLD_SIZE=8\0LOCAL_RANK=1\0MY_RANK=9\0", 50);
    CHECK(environ_value(block, "RANK") == "3");
    CHECK(environ_value(block, "WORLD_SIZE") == "8");
    CHECK(environ_value(block, "LOCAL_WORLD_SIZE").empty());
    const ProcessInfo self = read_process_info(::getpid());
    CHECK(self.readable);
    CHECK(process_alive(::getpid()));
    CHECK_FALSE(process_alive(0));
}

TEST_CASE("the daemon answers polls on its socket and arms a process until its file exists", "[capture]") {
    const std::string dir = us::test::temp_path("ipc-daemon");
    std::filesystem::create_directories(dir);
    OnDemandDaemon daemon(dir, fake_info, [](int) { return true; });
    daemon.start();
    std::string answer, why;
    REQUIRE(ipc_send_and_receive(dir, encode_ipc_poll({2, 0, {101, 100}}), answer, 2000));
    CHECK(decode_ipc_config_reply(answer.data(), answer.size(), why) == std::string());
    const std::string file = us::test::temp_path("armed_101.json");
    std::filesystem::remove(file);
    daemon.arm(101, "ACTIVITIES_ITERATIONS=3\n", file);
    for (int i = 0; i < 2; ++i) {  // asked again at every poll until the file is there
        REQUIRE(ipc_send_and_receive(dir, encode_ipc_poll({2, 0, {101, 100}}), answer, 2000));
        CHECK(decode_ipc_config_reply(answer.data(), answer.size(), why) == std::string("ACTIVITIES_ITERATIONS=3\n"));
    }
    CHECK(daemon.arm_status(101).requests_sent == 2);
    // Kineto opens FILE.tmp when the trace starts: from then on it is asked no more (it would queue a second trace).
    us::test::write_file(file + ".tmp", "");
    REQUIRE(ipc_send_and_receive(dir, encode_ipc_poll({2, 0, {101, 100}}), answer, 2000));
    CHECK(decode_ipc_config_reply(answer.data(), answer.size(), why) == std::string());
    CHECK(daemon.arm_status(101).tracing);
    CHECK_FALSE(daemon.arm_status(101).file_written);
    std::filesystem::rename(file + ".tmp", file);
    REQUIRE(ipc_send_and_receive(dir, encode_ipc_poll({2, 0, {101, 100}}), answer, 2000));
    CHECK(decode_ipc_config_reply(answer.data(), answer.size(), why) == std::string());
    CHECK(daemon.arm_status(101).file_written);
    // A registration gets its int32; a bad datagram gets nothing, and its reason is kept for the agent's log.
    REQUIRE(ipc_send_and_receive(dir, encode_ipc_register({0, 101, 0}), answer, 2000));
    CHECK(answer.size() == 44);
    CHECK_FALSE(ipc_send_and_receive(dir, "garbage", answer, 300));
    const std::vector<std::string> refusals = daemon.take_refusals();
    REQUIRE(refusals.size() == 1);
    CHECK(refusals[0].find("shorter than the 40-byte header") != std::string::npos);
    // The name is held: a second daemon on the same directory says so and what to do.
    try {
        OnDemandDaemon second(dir);
        FAIL("a second daemon bound the same name");
    } catch (const IpcNameTaken& e) {
        CHECK(std::string(e.what()).find("is taken: a dynolog daemon or an `ultrascope agent`") != std::string::npos);
        CHECK(std::string(e.what()).find("KINETO_IPC_SOCKET_DIR") != std::string::npos);
    }
    std::filesystem::remove(file);
}
