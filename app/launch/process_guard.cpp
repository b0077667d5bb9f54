#include "app/launch/process_guard.h"

#include <signal.h>

#include <atomic>
#include <csignal>
#include <initializer_list>

namespace us::app {

namespace {

constexpr int kSlots = 64;
std::atomic<pid_t> g_groups[kSlots];     // 0: free; lock-free atomics are safe to read from a handler
std::atomic<bool> g_terminated[kSlots];  // the slot's leader has had its SIGTERM
volatile std::sig_atomic_t g_signal = 0;

void on_stop_signal(int sig) {
    g_signal = sig;
    for (int i = 0; i < kSlots; ++i) {
        const pid_t group = g_groups[i].load();
        if (group > 0 && !g_terminated[i].exchange(true)) ::kill(group, SIGTERM);
    }
}

}  // namespace

void install_stop_signals() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    static_assert(std::atomic<pid_t>::is_always_lock_free);
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_signal; }

void register_child_group(pid_t group) {
    for (int i = 0; i < kSlots; ++i) {
        if (g_groups[i].load() != 0) continue;
        g_terminated[i].store(false);  // before the slot is published (one thread registers)
        pid_t free = 0;
        if (g_groups[i].compare_exchange_strong(free, group)) return;
    }
}

bool terminate_child_group_once(pid_t group) {
    for (int i = 0; i < kSlots; ++i)
        if (g_groups[i].load() == group) {
            if (g_terminated[i].exchange(true)) return false;
            ::kill(group, SIGTERM);
            return true;
        }
    ::kill(group, SIGTERM);  // not registered (no guard installed): just send it
    return true;
}

void unregister_child_group(pid_t group) {
    for (auto& g : g_groups) {
        pid_t mine = group;
        if (g.compare_exchange_strong(mine, 0)) return;
    }
}

}  // namespace us::app
