// Pass two of the Kineto reader: one parsed file (kineto_parse.h) becomes one rank of the trace store, by the
// mapping in docs/pytorch-traces.md: steps from ProfilerStep#N, CPU ops, collectives, kernels on their streams with
// the CPU op that launched them, NCCL kernels as communication, memory samples as counters, and the rank's run
// description (run_info.h) as its metadata.
#pragma once

#include <string>
#include <vector>

#include "profiler/import/kineto_parse.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// The rank a file says it is (distributedInfo.rank), or -1.
int rank_in_file(const KinetoFile& file);
// The rank `file` holds: distributedInfo.rank, else the rank its name says, else 0 when it is the run's only file
// (torch.profiler without torch.distributed; then `warning` says so); `rank_from` says which ("distributedInfo",
// "file name", "single file"). Throws UserError, naming the file, when none applies or the rank is out of range.
int rank_of_file(const KinetoFile& file, bool only_file, std::string& rank_from, std::string& warning);

// Adds `file` to `store` as rank `rank` (`rank_from`: "distributedInfo" or "file name"). Returns its warnings (no
// ProfilerStep, dropped python_function events, unknown categories ...), each naming the file. Does not finalize.
std::vector<std::string> ingest_kineto(const KinetoFile& file, int rank, const std::string& rank_from,
                                       TraceStore& store);

}  // namespace us::prof
