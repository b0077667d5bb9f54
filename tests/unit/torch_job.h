// A real PyTorch job for the capture tests (e2e and GUI): the Python that has torch, and a 2-rank torchrun DDP job
// polling Kineto's daemon (tests/data/capture_protocol/ddp_job.py) in a session of its own, every process of which
// is killed with it (TERM, then KILL) whatever it ignores.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"

namespace us::test {

// ULTRASCOPE_TORCH_PYTHON, else python3, where it imports torch.distributed; "" when neither does (the test skips).
inline std::string python_with_torch() {
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("ULTRASCOPE_TORCH_PYTHON")) candidates.push_back(p);
    candidates.push_back("python3");
    for (const std::string& python : candidates)
        if (run_process(python + " -c 'import torch.distributed' >/dev/null 2>&1").exit_code == 0) return python;
    return "";
}

struct TorchJob {
    int session = 0;  // the session leader's pid (0: not started)
    TorchJob() = default;
    TorchJob(const TorchJob&) = delete;
    TorchJob& operator=(const TorchJob&) = delete;
    ~TorchJob() {
        if (session <= 0) return;
        ::kill(-session, SIGTERM);
        for (int i = 0; i < 50 && ::kill(-session, 0) == 0; ++i) usleep(100000);
        ::kill(-session, SIGKILL);
    }
};

// Starts the job in `work` (its Kineto config for 1 s polls, its session file, job.log) with `env` before it
// (KINETO_IPC_SOCKET_DIR=...); `job.session` is its session once it started (0 when it did not: REQUIRE it).
inline void start_torch_job(TorchJob& job, const std::string& python, const std::string& work, const std::string& env,
                            int port) {
    write_file(work + "/kineto.conf", "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n");
    const std::string job_script = std::string(US_TEST_DATA_DIR) + "/capture_protocol/ddp_job.py";
    // The shell that setsid starts leads the new session whether or not setsid had to fork: it writes its pid.
    run_process("KINETO_USE_DAEMON=1 KINETO_CONFIG=" + work + "/kineto.conf " + env + "setsid sh -c 'echo $$ > " +
                work + "/session; exec " + python + " -m torch.distributed.run --nproc-per-node 2 --master-port " +
                std::to_string(port) + " " + job_script + " --seconds 150' > " + work + "/job.log 2>&1 &");
    for (int i = 0; i < 50 && read_file(work + "/session").empty(); ++i) usleep(100000);
    job.session = std::atoi(read_file(work + "/session").c_str());
}

}  // namespace us::test
