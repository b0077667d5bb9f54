// Where a rank's threads may run: the machine (the kernel it runs on) and the CPUs its process may use. Ranks on one
// machine share its cores whatever their host names say (nodes emulated in network namespaces, containers), so the
// report can tell when a run asks more threads of a machine than it has cores: its ranks then take turns on them,
// and their waits for a core are the run's own rather than the machine's other load (profiler/analysis/
// core_sharing.h). Recorded in each rank's metadata at its start.
#pragma once

#include <string>

namespace us {

// The kernel's boot id (/proc/sys/kernel/random/boot_id): the same for every process on one machine since its
// boot, namespaces and containers included; "" where the kernel does not say.
std::string kernel_boot_id();

// The CPUs this process may run on (its affinity mask, which a launcher's binding narrows), as a list: "0-3,8"; ""
// where it cannot be read.
std::string affinity_cpu_list();

}  // namespace us
