// An injected noisy neighbour (--slow-rank R --slow-factor F --slow-kind load; docs/blame.md): rank R's trainer
// thread is pinned to the CPU it runs on, beside F - 1 busy threads pinned there too, so the kernel gives it about
// 1/F of that CPU. The rank computes about F times as long, as with --slow-kind work, but the time is the machine's
// other load, not the rank's work: the trainer's run-queue wait (engine/train/core_wait.h) shows it, and blame
// tells the two apart. The OpenMP pool is started first, unpinned; threads the trainer thread starts afterwards
// inherit the pin. The busy threads stop, and the thread's CPUs come back, when it is destroyed (after the last step).
#pragma once

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

namespace us {

class InjectedLoad {
public:
    // `factor`: a whole number from 2; throws UserError where the thread cannot be pinned.
    explicit InjectedLoad(double factor);
    ~InjectedLoad();
    InjectedLoad(const InjectedLoad&) = delete;
    InjectedLoad& operator=(const InjectedLoad&) = delete;

private:
    void stop();
    int m_cpu = -1;
    pthread_t m_owner = pthread_self();  // the pinned thread; its CPUs before (m_was) come back when the load stops
    cpu_set_t m_was{};
    std::atomic<bool> m_stop{false};
    std::vector<std::thread> m_busy;
};

}  // namespace us
