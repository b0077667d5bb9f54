// Pass one of a capture over one rank's raw on-demand trace (what Kineto wrote, docs/attach-pytorch.md): the facts
// the step check and the writer need, read in one streamed walk that also proves the file complete before anything
// is written from it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace us::capture {

struct TimeSpan {
    int64_t begin = 0, end = 0;  // ns on the trace's own clock (ts, relative to baseTimeNanoseconds)
};

struct KnownGroup {
    std::string name, desc, ranks_json;  // from the events' args ("Process Group Name", ...)
};

struct RawTrace {
    std::string path;
    const std::string* bytes = nullptr;  // the content, when held in memory (CapturedRank::raw_bytes)
    bool gzip = false;
    int64_t base_time_ns = 0;               // baseTimeNanoseconds: ts + this is the wall clock (0 when absent)
    bool has_window = false;                // the profiler's own "Trace" span, or its "Iteration Start" instant
    int64_t window_begin = 0;               // where the capture began (else the first event)
    std::vector<TimeSpan> optimizer_steps;  // Optimizer.step#... host annotations, in time order
    std::vector<TimeSpan> profiler_steps;   // ProfilerStep#N spans already present (a job under torch.profiler)
    int64_t step_pid = 0, step_tid = 0;     // the thread that ran the optimizer (where ProfilerStep# spans go)
    std::string backend;                    // "gloo" or "nccl" as the events tell it; empty when they do not
    std::vector<KnownGroup> groups;         // process groups named in the events' args, first seen first
    nlohmann::json distributed_info;        // null when absent (always, in on-demand traces of torch 2.15)
    uint64_t events = 0;
};

// Reads `path` through (or `bytes`, kept by the caller for as long as the RawTrace, with `path` naming them). Throws
// UserError naming it when it is not a complete Kineto trace.
RawTrace read_raw_trace(const std::string& path, const std::string* bytes = nullptr);

// Whether the file Kineto is writing at `path` is finished: Kineto opens <file>_<pid>.json when its window ends and
// appends the events to it, so the file appears before it is complete; its last bytes are the "traceName" key and
// the closing '}' (older Kineto: the "Record Window End" instant, then "]}"). Reads only the tail of a plain file (a
// gzip one is read through). False when it cannot be read.
bool raw_trace_complete(const std::string& path);

}  // namespace us::capture
