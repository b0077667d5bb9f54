// What a capture of a running PyTorch job hands over once every rank's on-demand Kineto trace is on this machine,
// and finish_capture, which turns those raw files into a folder of rank files that opens like any other run
// (docs/attach-pytorch.md): the rank and world size added (distributedInfo), step markers derived.
#pragma once

#include <string>
#include <vector>

namespace us::capture {

struct CapturedRank {
    int rank = -1, world_size = 0, local_rank = -1;
    int pid = 0;
    std::string host;       // the node the rank ran on
    std::string raw_trace;  // the path of the file Kineto wrote (<file>_<pid>.json, maybe .gz)
    std::string backend;    // "gloo", "nccl" ...; empty: told by the trace (gloo: annotations, nccl kernels)
    // The file's bytes (plain or gzip) when they came over the network rather than lie at raw_trace, which then
    // only names them in messages. Empty: read raw_trace.
    std::string raw_bytes;
};

struct CaptureSummary {
    std::vector<std::string> rank_files;  // written, one per rank, in rank order
    int steps = 0;                        // steps every rank captured (the fewest any rank has)
    bool same_steps = true;               // every rank captured the same steps (judged on the traces' clocks)
    std::string message;                  // what was written and, when not same_steps, which rank differs and how
};

// Writes DIR/rank<R>.<host>.pt.trace.json (.json.gz when the raw trace was gzip) for each rank: the trace as Kineto
// wrote it, with distributedInfo (rank, world_size, backend, pg_config: the default group, and the groups the
// events' args name) and one ProfilerStep#K span per optimizer step (step_check.h says how they are derived). Every
// raw trace is read through before anything is written; the files are written under temporary names and renamed
// once all are complete. Throws us::UserError naming the file and what to do (a damaged or cut trace, a rank given
// twice, a folder holding another capture's rank files or the raw traces themselves); then nothing is left in
// `out_dir`. The raw traces are only read: the caller removes them when it wants. The message names `shown_dir`
// where the caller moves the folder after (a staging folder renamed into place), else `out_dir`.
CaptureSummary finish_capture(const std::vector<CapturedRank>& ranks, const std::string& out_dir,
                              const std::string& shown_dir = "");

}  // namespace us::capture
