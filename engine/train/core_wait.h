// How long this thread has been ready to run but waiting for a core: the kernel's run-queue delay for it
// (/proc/thread-self/schedstat, its second field). The trainer records it at each step's end as a cumulative
// counter (profiler/event.h: runqueue_wait_ms), so that the report can tell time the machine's other load took
// from time the schedule or a neighbour did (a pipeline bubble's misses: docs/report-schema.md, "misses").
#pragma once

namespace us {

// Milliseconds since the thread started; -1 where the kernel does not say (no schedstat, not Linux).
double thread_runqueue_wait_ms();

}  // namespace us
