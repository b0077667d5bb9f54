// A Kineto rank's process groups and run description: the groups distributedInfo lists (pg_config) and those the
// collectives' args name, each with the parallelism it serves (told by its description, its ranks, or its
// send/recv traffic) and the SpanRecord group id its spans get; and the rank's metadata (RunInfo's fields plus the
// file and how its rank was told).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/import/kineto_parse.h"
#include "profiler/trace/run_info.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

struct KinetoGroups {
    std::vector<ProcessGroupInfo> groups;  // pg_config's, then those only the args name
    std::vector<uint8_t> group_ids;        // per KinetoFile::groups index: the SpanRecord group id
    int world_size = 0;                    // 0: unknown
    std::string backend;
    std::vector<std::string> warnings;
};

// `p2p_groups`: per KinetoFile::groups index, whether sends or receives ran on it.
KinetoGroups identify_groups(const KinetoFile& file, int rank, const std::vector<bool>& p2p_groups);

// The rank's metadata (docs/pytorch-traces.md): source, file, rank, rank_from and the file's versions, with the
// run's description (RunInfo: world size, process groups, devices, clock, steps_from, kineto_step_offset, backend)
// under "run". The reader adds the stream and thread ids once it has seen them.
RankMetadata kineto_rank_metadata(const KinetoFile& file, int rank, const std::string& rank_from,
                                  const KinetoGroups& groups, const std::string& steps_from);

}  // namespace us::prof
