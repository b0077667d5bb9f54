// Helpers shared by the unit tests: random tensors, finite-difference gradient checks, temporary files and
// running the programs under test as subprocesses.
#pragma once

#include "catch_compat.h"
#include "temp_dir.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "common/core/rng.h"

namespace us::test {

// A test that cannot run here (no GPU, no AVX-512 BF16) says why and ends: ctest reports it as skipped, not passed
// (tests/CMakeLists.txt matches this line with SKIP_REGULAR_EXPRESSION). The SUCCEED keeps `--warn NoAssertions`
// from calling the empty run a failure when the binary runs by hand.
inline void skip_test(const std::string& why) {
    std::printf("US_TEST_SKIPPED: %s\n", why.c_str());
    std::fflush(stdout);
    SUCCEED("skipped: " << why);
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f) {
    Rng rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = float(rng.next_normal()) * scale;
    return v;
}

inline Tensor tensor_of(std::vector<float>& v) { return Tensor::of(v.data(), int64_t(v.size())); }

// Central-difference check of d(loss)/d(x[i]) for a sample of indices of x.
// loss() must recompute the scalar from the current contents of x.
struct GradCheck {
    double eps = 1e-2;
    double atol = 2e-3;
    double rtol = 2e-2;
    int samples = 24;
};

inline void check_gradient(const char* what, std::vector<float>& x, const std::vector<float>& analytic,
                           const std::function<double()>& loss, const GradCheck& opts = {}) {
    REQUIRE(x.size() == analytic.size());
    Rng rng(x.size() * 31 + 7);
    const int n = int(std::min<size_t>(size_t(opts.samples), x.size()));
    for (int s = 0; s < n; ++s) {
        const size_t i = x.size() <= size_t(opts.samples) ? size_t(s) : size_t(rng.next_below(x.size()));
        const float saved = x[i];
        x[i] = float(saved + opts.eps);
        const double up = loss();
        x[i] = float(saved - opts.eps);
        const double down = loss();
        x[i] = saved;
        const double numeric = (up - down) / (2 * opts.eps);
        const double a = analytic[i];
        INFO(what << "[" << i << "]: analytic " << a << " numeric " << numeric);
        CHECK(std::abs(a - numeric) <= opts.atol + opts.rtol * std::max(std::abs(a), std::abs(numeric)));
    }
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
    return s;
}

inline std::string temp_path(const std::string& name) {
    const auto dir = test_temp_dir();
    std::filesystem::create_directories(dir);
    return (dir / name).string();
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Some English-like text, long enough for small test runs.
inline std::string sample_text(size_t bytes) {
    static const char* words[] = {"the",  "cat",  "sat", "on",   "a",     "mat",  "and",  "dog", "ran",  "to",
                                  "park", "with", "red", "ball", "while", "bird", "sang", "in",  "tree", "."};
    std::string s;
    Rng rng(99);
    while (s.size() < bytes) {
        s += words[rng.next_below(20)];
        s += ' ';
    }
    s.resize(bytes);
    return s;
}

// A file of sample_text(bytes) in the temporary directory, written at the first call for `name` in this process.
inline std::string sample_data_file(const std::string& name, size_t bytes) {
    static std::map<std::string, std::string> written;
    auto [it, fresh] = written.try_emplace(name);
    if (fresh) {
        it->second = temp_path(name);
        write_file(it->second, sample_text(bytes));
    }
    return it->second;
}

struct ProcessResult {
    int exit_code = -1;
    std::string output;  // stdout and stderr together
};

inline ProcessResult run_process(const std::string& command) {
    ProcessResult r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

// The loss of the last progress line `ultrascope run` printed ("step 3/3 [===] loss 5.1409 | ..."), not any later
// "loss" (a planner table names the loss op when a machine.json is found): "" when there is none.
inline std::string last_progress_loss(const std::string& output) {
    const size_t at = output.rfind("] loss ");
    return at == std::string::npos ? "" : output.substr(at + 2, 11);
}

// The emulated nodes' namespaces (docs/nodes.md: "us<pid>n<i>") whose process no longer runs: what a finished run
// left behind. Runs of other tests going on beside have live processes and are not listed.
inline std::string stale_emulated_nodes() {
    return run_process(
               "for n in $(ip netns list 2>/dev/null | cut -d' ' -f1); do "
               "p=$(echo $n | sed -n 's/^us\\([0-9][0-9]*\\)n[0-9]*$/\\1/p'); "
               "[ -n \"$p\" ] && [ ! -d /proc/$p ] && echo $n; done; true")
        .output;
}

// Why emulated nodes (docs/nodes.md) cannot be made on this machine ("" when they can): they need root and network
// namespaces.
inline std::string why_no_emulated_nodes() {
    if (::geteuid() != 0) return "emulated nodes need root (CAP_NET_ADMIN)";
    const ProcessResult probe = run_process("ip netns add us-probe-$$ && ip netns del us-probe-$$");
    return probe.exit_code == 0 ? "" : "this machine cannot make network namespaces: " + probe.output;
}

#ifdef US_TEST_DATA_DIR
// A copy of a committed Kineto run (the .gz files of tests/data/kineto/NAME) in a folder of its own: digests cached
// beside the traces stay out of the repository.
inline std::string copy_kineto_run(const std::string& name, const std::string& as) {
    const std::filesystem::path dir = temp_path(as);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (const auto& e : std::filesystem::directory_iterator(std::string(US_TEST_DATA_DIR) + "/kineto/" + name))
        if (e.path().extension() == ".gz") std::filesystem::copy_file(e.path(), dir / e.path().filename());
    return dir.string();
}
#endif

// A program running beside the test (through `sh -c`, its output to a file), for tests that signal it while it
// works. The destructor kills what is left of it.
class BackgroundProcess {
public:
    BackgroundProcess(const std::string& command, const std::string& log_path) : m_log(log_path) {
        m_pid = ::fork();
        REQUIRE(m_pid >= 0);
        if (m_pid == 0) {
            ::setpgid(0, 0);
            const std::string line = "exec " + command + " >" + log_path + " 2>&1";
            ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::setpgid(m_pid, m_pid);
    }
    ~BackgroundProcess() {
        if (m_pid > 0 && !m_exit) {
            ::kill(-m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
    }
    BackgroundProcess(const BackgroundProcess&) = delete;
    BackgroundProcess& operator=(const BackgroundProcess&) = delete;

    pid_t pid() const { return m_pid; }
    void signal(int sig) const { ::kill(m_pid, sig); }
    std::string output() const { return read_file(m_log); }
    // Waits until the output contains `text` (true) or the program exits or `seconds` pass (false).
    bool wait_for_output(const std::string& text, double seconds) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < end) {
            if (output().find(text) != std::string::npos) return true;
            if (exited()) return output().find(text) != std::string::npos;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }
    bool exited() {
        if (m_exit) return true;
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid)
            m_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return bool(m_exit);
    }
    // The exit code (128 + signal for a signal), or nothing if it is still running after `seconds`.
    std::optional<int> wait_exit(double seconds) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!exited() && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return m_exit;
    }

private:
    pid_t m_pid = -1;
    std::string m_log;
    std::optional<int> m_exit;
};

// How many processes have `marker` (letters, digits, '-', '.', '/') in their command line. The pattern is written
// "[m]arker" so that the shell running pgrep, whose own command line holds the pattern, does not match it.
inline int processes_matching(const std::string& marker) {
    std::string pattern = "[";
    pattern += marker.front();
    pattern += ']';
    pattern.append(marker, 1);
    const ProcessResult r = run_process("pgrep -f -c -- '" + pattern + "'");
    return std::atoi(r.output.c_str());
}

// Waits up to `seconds` for every process with `marker` in its command line to be gone; how many remain.
inline int wait_processes_gone(const std::string& marker, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int n = processes_matching(marker);
    while (n > 0 && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        n = processes_matching(marker);
    }
    return n;
}

inline std::string bin(const std::string& name) { return std::string(US_BIN_DIR) + "/" + name; }

// A report (report_json, or `ultrascope report --json`) of a real run: every figure that misses its prediction or
// formula by more than 10% carries an explanation (profiler/analysis/misses.h, issue 32). Names each one that does
// not.
inline void check_no_unexplained_misses(const nlohmann::json& report) {
    REQUIRE(report.contains("misses"));
    int unexplained = 0;
    for (const auto& m : report["misses"])
        if (m["explained"].is_null()) {
            ++unexplained;
            UNSCOPED_INFO("unexplained miss: " << m.dump());
        }
    CHECK(unexplained == 0);
}

}  // namespace us::test
