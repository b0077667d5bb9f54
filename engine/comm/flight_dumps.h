// When and where a rank writes its flight recorder dump (flight_recorder.h), in PyTorch's format
// (profiler/flight/flight_writer.h): on its watchdog's timeout (an operation or a step stuck longer than
// --hang-timeout), on request (SIGUSR1, which `ultrascope run` sends through mpirun when a run stops making
// progress), and when the rank dies (std::terminate, MPI's abort path, fatal signals as far as a dying process
// can). A dump goes to the trace (the live stream or --trace, chunk kind flight_dump) and, with --fr-dump-dir, to
// DIR/comm_lib_trace_rank_<rank>, PyTorch's file name. Nothing is written from a signal handler: a dedicated thread
// writes, woken through a pipe.
#pragma once

#include <string>

namespace us {

struct FlightDumpOptions {
    double hang_timeout_s = 0;  // the watchdog's limit (0: no watchdog dumps)
    std::string dump_dir;       // "" : the trace only
};

// Starts the dump thread (the watchdog, the requests), the std::terminate handler and the fatal-signal hooks. Call
// once, after MPI is initialised (its handlers are chained) and the flight recorder is configured.
void start_flight_dumps(const FlightDumpOptions& options);
// Stops the watchdog and the thread (the end of training: what follows is not a hang).
void stop_flight_dumps();

// Asks the dump thread for a dump, naming why ("SIGUSR1"). Any thread; not from a signal handler.
void request_flight_dump(const std::string& why);
// Writes a dump on the calling thread: a dying rank's last act (the abort path). At most once per process.
void write_flight_dump_on_death(const std::string& why);

// The dump file's path for a rank: DIR/comm_lib_trace_rank_<rank> (PyTorch's TORCH_FR_DUMP_TEMP_FILE default).
std::string flight_dump_path(const std::string& dir, int rank);

}  // namespace us
