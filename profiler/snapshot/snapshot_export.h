// The other way: an Ultrascope trace's memory events as a PyTorch memory snapshot (a pickle of plain data) that
// pytorch.org/memory_viz and torch.cuda._memory_viz open. Ultrascope records allocations by category and label, not
// by address, and has no caching allocator: each allocation becomes its own segment (reserved = allocated), at a
// synthetic address, with two frames that carry its category, label, layer, phase and step. What the first event's
// total says was allocated before it becomes one allocation at the start, labelled so.
#pragma once

#include <string>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::snap {

struct SnapshotExportStats {
    size_t allocations = 0, frees = 0;
    size_t unmatched_frees = 0;  // frees with no live allocation of that category and label (left out)
    size_t alive_at_end = 0;
};

// The snapshot of one rank's memory events, as pickle bytes (protocol 4).
std::string memory_snapshot_of_rank(const prof::TraceStore& store, int rank, SnapshotExportStats& stats);

// Writes one snapshot per rank: `out` itself for a single rank, else `out` with "rank<N>_" before its file name
// (rank0_OUT.pickle ...), as `ultrascope report` reads them back. Each file is written whole or not at all.
// Returns the files written; throws UserError when the trace has no memory events.
std::vector<std::string> export_memory_snapshots(const prof::TraceStore& store, const std::string& out,
                                                 std::vector<SnapshotExportStats>* stats = nullptr);

}  // namespace us::snap
