// A run on disk, whatever its form: one Ultrascope trace (.ustrace), or PyTorch profiler (Kineto) files, one per
// rank, given one by one or as a directory (tensorboard_trace_handler, Megatron-LM torch_profile/rank-R.json.gz,
// torchtitan profiling/traces/iteration_N/rankR_trace.json.gz). load_run is the one entry point every command and
// the GUI use to open a run.
#pragma once

#include <string>
#include <vector>

#include "profiler/import/kineto_memory_ops.h"
#include "profiler/trace/run_info.h"  // rank_from_file_name
#include "profiler/trace/trace_store.h"

namespace us::prof {

// Whether the file starts like an Ultrascope trace ("USTRACE\0").
bool is_ultrascope_trace(const std::string& path);

struct RunFiles {
    std::vector<std::string> files;  // Kineto files, or the one Ultrascope trace
    bool ultrascope = false;
    std::vector<std::string> warnings;  // e.g. which iteration_N folder was taken
};
// The files of a run named by `paths` (files or directories). Throws UserError when nothing readable is named.
RunFiles find_run_files(const std::vector<std::string>& paths);

// Loads the run named by `paths` into `store` and finalizes it: an Ultrascope trace through load_trace, Kineto files
// one rank each through read_rank_file (rank_file.h: ranks from distributedInfo, else from the file name, else 0 for
// a lone file, warned; two files of one rank refused), each rank with its share of the store's cap. `memory`, when
// given, receives each rank's [memory] events with their inferred categories (kineto_memory_ops.h). Returns the
// warnings; throws UserError on bad input, naming the file.
std::vector<std::string> load_run(const std::vector<std::string>& paths, TraceStore& store,
                                  std::vector<KinetoMemoryEvents>* memory = nullptr);

}  // namespace us::prof
