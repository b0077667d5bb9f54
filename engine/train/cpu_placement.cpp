#include "engine/train/cpu_placement.h"

#include <sched.h>

#include <fstream>

namespace us {

std::string kernel_boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return in ? id : std::string();
}

std::string affinity_cpu_list() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
    std::string list;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &set)) continue;
        int last = cpu;  // the run of CPUs that starts here
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
        if (!list.empty()) list += ',';
        list += last == cpu ? std::to_string(cpu) : std::to_string(cpu) + "-" + std::to_string(last);
        cpu = last;
    }
    return list;
}

}  // namespace us
