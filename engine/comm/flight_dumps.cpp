// The flight recorder's dumps: the thread that writes them, the watchdog it runs, and the hooks of a dying rank
// (flight_dumps.h).
#include "engine/comm/flight_dumps.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>

#include "engine/comm/flight_recorder.h"
#include "profiler/flight/flight_writer.h"
#include "profiler/record/recorder.h"

namespace us {

namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

struct DumpState {
    FlightDumpOptions options;
    int wake_read = -1, wake_write = -1;  // the pipe that wakes the thread (written from signal handlers too)
    std::thread thread;
    std::mutex mutex;  // request, stopping
    std::string request;
    bool stopping = false;
    std::timed_mutex write_mutex;  // one dump at a time
    std::atomic<int> fatal_signal{0};
    std::atomic<bool> fatal_done{false};
    std::atomic<bool> died{false};  // a dying rank's dump was written (or is being written)
    std::terminate_handler previous_terminate = nullptr;
    struct sigaction previous[sizeof kFatalSignals / sizeof kFatalSignals[0]] = {};
};

DumpState& state() {
    static DumpState s;
    return s;
}

void wake() {
    const char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(state().wake_write, &byte, 1);  // async-signal-safe
}

// Snapshot, pickle, and hand to the trace and the file; one line on stderr says where it went.
void write_dump(const std::string& why) {
    FlightRecorder& recorder = flight_recorder();
    const int rank = recorder.options().rank;
    if (!recorder.enabled()) {
        std::fprintf(
            stderr,
            "ultrascope-train: rank %d: no flight recorder dump (%s): the recorder is off (--fr-buffer-size 0)\n", rank,
            why.c_str());
        return;
    }
    std::unique_lock lock(state().write_mutex, std::defer_lock);
    if (!lock.try_lock_for(std::chrono::seconds(3))) return;  // another dump is stuck: this process is in trouble
    recorder.poll_unfinished();
    const flight::FlightDump dump = recorder.snapshot();
    std::string where;
    if (prof::enabled()) {
        prof::record_flight_dump(flight::write_flight_dump(dump));
        where = "the trace";
    }
    if (const std::string& dir = state().options.dump_dir; !dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        const std::string path = flight_dump_path(dir, rank);
        const bool saved = flight::save_flight_dump(dump, path);
        where += (where.empty() ? "" : " and ") +
                 (saved ? path : "nowhere: cannot write " + path + ": " + std::strerror(errno));
    }
    if (where.empty()) where = "nowhere (no --trace, --connect or --fr-dump-dir)";
    std::fprintf(stderr, "ultrascope-train: rank %d: flight recorder dump (%s): %zu entries -> %s%s\n", rank,
                 why.c_str(), dump.entries.size(), where.c_str(),
                 dump.injected_fault.empty() ? "" : (" [injected: " + dump.injected_fault + "]").c_str());
    std::fflush(stderr);
}

void on_fatal_signal(int sig) {
    DumpState& s = state();
    if (!s.died.exchange(true) && s.thread.joinable()) {
        s.fatal_signal.store(sig);
        wake();
        for (int i = 0; i < 300 && !s.fatal_done.load(); ++i) {  // at most 3 s for the thread to write
            const timespec pause{0, 10000000};
            nanosleep(&pause, nullptr);
        }
    }
    for (size_t i = 0; i < std::size(kFatalSignals); ++i)  // then what was there before (Open MPI's backtrace)
        if (kFatalSignals[i] == sig) sigaction(sig, &s.previous[i], nullptr);
    raise(sig);
}

void on_terminate() {
    std::string what = "std::terminate";
    if (std::exception_ptr e = std::current_exception()) try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            what += std::string(": ") + x.what();
        } catch (...) {
            what += ": an unknown exception";
        }
    write_flight_dump_on_death(what);
    prof::stop_recording(false, what);  // the stream's queue is sent before the process goes
    if (state().previous_terminate) state().previous_terminate();
    std::abort();
}

// What the watchdog sees, once per stall: a dump naming it.
void watch(int64_t& dumped_key) {
    const double limit = state().options.hang_timeout_s;
    if (limit <= 0) return;
    int64_t key = 0;
    const std::string what = flight_recorder().stall(limit, key);
    if (what.empty() || key == dumped_key) return;
    dumped_key = key;
    write_dump("watchdog, --hang-timeout " + std::to_string(int(limit)) + " s: " + what);
}

void loop() {
    DumpState& s = state();
    // No stall dumped yet: not 0, which is the first operation's record id (a rank that waits in its very first
    // collective must dump too).
    int64_t dumped_key = std::numeric_limits<int64_t>::min();
    for (;;) {
        pollfd p{s.wake_read, POLLIN, 0};
        ::poll(&p, 1, 250);
        char drain[64];
        while (::read(s.wake_read, drain, sizeof drain) > 0) {
        }
        if (const int sig = s.fatal_signal.load(); sig != 0) {
            const std::string why = std::string("fatal signal ") + strsignal(sig);
            write_dump(why);
            prof::stop_recording(false, why);
            s.fatal_done.store(true);
            return;
        }
        std::string request;
        {
            std::lock_guard lock(s.mutex);
            if (s.stopping) return;
            request.swap(s.request);
        }
        if (!request.empty()) write_dump(request);
        flight_recorder().poll_unfinished();
        watch(dumped_key);
    }
}

}  // namespace

std::string flight_dump_path(const std::string& dir, int rank) {
    return (std::filesystem::path(dir) / ("comm_lib_trace_rank_" + std::to_string(rank))).string();
}

void start_flight_dumps(const FlightDumpOptions& options) {
    DumpState& s = state();
    if (s.thread.joinable()) return;
    s.options = options;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
    s.wake_read = fds[0], s.wake_write = fds[1];
    s.thread = std::thread(loop);
    s.previous_terminate = std::set_terminate(on_terminate);
    struct sigaction action {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kFatalSignals); ++i) sigaction(kFatalSignals[i], &action, &s.previous[i]);
}

void stop_flight_dumps() {
    DumpState& s = state();
    if (!s.thread.joinable()) return;
    {
        std::lock_guard lock(s.mutex);
        s.stopping = true;
    }
    wake();
    s.thread.join();
    std::set_terminate(s.previous_terminate);
    for (size_t i = 0; i < std::size(kFatalSignals); ++i) sigaction(kFatalSignals[i], &s.previous[i], nullptr);
}

void request_flight_dump(const std::string& why) {
    DumpState& s = state();
    if (!s.thread.joinable()) return;
    {
        std::lock_guard lock(s.mutex);
        s.request = why;
    }
    wake();
}

void write_flight_dump_on_death(const std::string& why) {
    if (state().died.exchange(true)) return;
    write_dump(why);
}

}  // namespace us
