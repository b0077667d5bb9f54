// An injected noisy neighbour (injected_load.h).
#include "engine/parallel/injected_load.h"

#include <pthread.h>
#include <sched.h>

#include <cmath>
#include <cstring>

#include "common/core/check.h"

namespace us {

namespace {

void pin_to(pthread_t thread, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    const int rc = pthread_setaffinity_np(thread, sizeof(set), &set);
    US_CHECK_INPUT(rc == 0, "--slow-kind load: cannot pin a thread to CPU {} ({}); use --slow-kind work", cpu,
                   std::strerror(rc));
}

}  // namespace

InjectedLoad::InjectedLoad(double factor) {
    const int competitors = int(std::lround(factor)) - 1;
    US_CHECK_INPUT(competitors >= 1, "--slow-kind load needs --slow-factor 2 or more (got {})", factor);
    // The OpenMP pool (OpenBLAS's too) is started before the pin, so that its threads are not pinned with this one:
    // a thread inherits its creator's CPUs, and only the trainer thread is meant to share its CPU.
#pragma omp parallel
    {}
    m_cpu = sched_getcpu();
    US_CHECK_INPUT(pthread_getaffinity_np(pthread_self(), sizeof(m_was), &m_was) == 0,
                   "--slow-kind load: cannot read this thread's CPUs; use --slow-kind work");
    US_CHECK_INPUT(m_cpu >= 0,
                   "--slow-kind load: this system does not say which CPU a thread runs on; use "
                   "--slow-kind work");
    pin_to(pthread_self(), m_cpu);
    try {
        for (int i = 0; i < competitors; ++i) {
            m_busy.emplace_back([this] {
                // Busy, never blocking: a neighbour that wants the CPU all the time.
                while (!m_stop.load(std::memory_order_relaxed)) {
                }
            });
            pin_to(m_busy.back().native_handle(), m_cpu);
        }
    } catch (...) {
        stop();
        throw;
    }
}

InjectedLoad::~InjectedLoad() { stop(); }

void InjectedLoad::stop() {
    m_stop = true;
    for (std::thread& t : m_busy)
        if (t.joinable()) t.join();
    m_busy.clear();
    pthread_setaffinity_np(m_owner, sizeof(m_was), &m_was);  // the trainer thread's CPUs as they were
}

}  // namespace us
