// Chrome trace event JSON (the format chrome://tracing, Perfetto and Holistic Trace Analysis read): one process
// per rank named "rank R (dp D, pp P)", one thread per lane (tid = lane; the device lanes one per GPU stream,
// tid = lane * 100 + stream slot, named "device (stream 7)"), an X event per span with its step, micro-batch,
// layer, bytes and FLOPs in args, C counter events for memory per category and for every counter (device memory
// reserved among them), and a top-level distributedInfo.
#pragma once

#include <string>

#include "profiler/trace/trace_store.h"

namespace us::prof {

// Writes OUT (gzip-compressed when it ends in .gz), atomically. UserError when it cannot be written.
void export_chrome_trace(const TraceStore& store, const std::string& out_path);

// The rank's process label: "rank 1 (dp 1, pp 0)" from its metadata coordinates.
std::string rank_label(const RankTrace& rank);

}  // namespace us::prof
