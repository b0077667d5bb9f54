// Several ranks' memory snapshots opened together (`ultrascope report rank0.pickle rank1.pickle`, or the GUI's
// File > Open): each read and analysed, in rank order. The report and the GUI's snapshot view both start here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "profiler/snapshot/memory_snapshot.h"
#include "profiler/snapshot/snapshot_analysis.h"

namespace us::snap {

struct RankSnapshot {
    std::string path;
    std::shared_ptr<const MemorySnapshot> snapshot;  // shared: the GUI's series and views point into it
    SnapshotAnalysis analysis;
};

// Reads and analyses every file of `paths` (a UserError names the first that cannot be read), sorted by the rank
// each says (unknown ranks, -1, first, in the order given).
std::vector<RankSnapshot> load_rank_snapshots(const std::vector<std::string>& paths, size_t timeline_samples = 64);

}  // namespace us::snap
