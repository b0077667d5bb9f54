// When the host launched each kernel a rank's GPU ran: what HTA's idle breakdown (host wait) and the Kineto
// export's cuda_runtime launch events need. Engine traces do not record the launch call itself, only the op that
// made it (its host-lane span); the launch is inferred from that op, and said so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::prof {

// The launch time of each device span of a rank (INT64_MIN where unknown), indexed like the lane's spans(): for
// engine traces, the begin of the host-lane op that launched it (matched by its step, micro-batch, layer, phase and
// class, the earliest one not before the previous kernel's on the same stream: inferred, a lower bound); for
// imported traces, the kernel's own cuda_runtime launch call where the reader joined them by correlation id
// (Span::launch_lead), else the call inside the op the reader names as the kernel's launcher (matched by name and
// step, in stream order).
struct LaunchTimes {
    std::vector<int64_t> device, device_comm;
    std::string source;  // "" when none is known
};
LaunchTimes launch_times(const TraceStore& store, int rank);

}  // namespace us::prof
