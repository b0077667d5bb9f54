// Several ranks' memory snapshots, read and analysed in rank order (snapshot_set.h).
#include "profiler/snapshot/snapshot_set.h"

#include <algorithm>

namespace us::snap {

std::vector<RankSnapshot> load_rank_snapshots(const std::vector<std::string>& paths, size_t timeline_samples) {
    std::vector<RankSnapshot> out;
    for (const std::string& path : paths) {
        auto snapshot = std::make_shared<const MemorySnapshot>(load_memory_snapshot(path));
        SnapshotAnalysis analysis = analyze_snapshot(*snapshot, timeline_samples);
        out.push_back({path, std::move(snapshot), std::move(analysis)});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const RankSnapshot& a, const RankSnapshot& b) { return a.snapshot->rank < b.snapshot->rank; });
    return out;
}

}  // namespace us::snap
