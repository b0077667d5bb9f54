// Nothing the product launches outlives it. The GUI and `ultrascope run` register the process group of every run
// they start; SIGTERM, SIGINT and SIGHUP then forward SIGTERM to each group's leader (mpirun) at once (from the
// handler: kill() is async-signal-safe) and ask the program to stop, which it does by stopping its runs properly and
// exiting. mpirun passes the SIGTERM on to its ranks, which end their streams and trace files as "stopped". Exactly
// one SIGTERM: Open MPI reads a second one as "abort now" and SIGKILLs the ranks before they can close their streams.
// If the program dies by SIGKILL, mpirun gets SIGTERM from the kernel instead (Launcher sets PR_SET_PDEATHSIG), and
// its ranks stop with it.
#pragma once

#include <sys/types.h>

namespace us::app {

// Installs the handlers (once; later calls do nothing).
void install_stop_signals();
// A stop signal arrived (its number), or 0.
int stop_signal();
void register_child_group(pid_t group);
void unregister_child_group(pid_t group);
// Sends SIGTERM to the group's leader unless the handler (or an earlier call) already did; true if this call sent it.
bool terminate_child_group_once(pid_t group);

}  // namespace us::app
