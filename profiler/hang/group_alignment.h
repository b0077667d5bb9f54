// The dumps' entries regrouped per process-group instance: for each group (name, desc as its entries carry them),
// its members in rank order and, per member, the indices of its collective and p2p entries in sequence order. A
// dump's entries are visited once; what is kept is 8 bytes per entry, so 4,096 ranks of 2,000 entries stay small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/hang/dump_files.h"

namespace us::hang {

struct MemberEntries {
    uint32_t dump = 0;                  // index in DumpSet::dumps
    std::vector<uint32_t> collectives;  // entry indices, by collective_seq_id
    std::vector<uint32_t> p2p;          // entry indices, by p2p_seq_id
    bool sorted = false;                // (while aligning)
};

struct GroupInstance {
    std::string name, desc;
    std::vector<MemberEntries> members;  // by rank
    std::vector<int> config_ranks;       // from pg_config where a dump gives this group whole; else empty
};

struct AlignedGroups {
    std::vector<GroupInstance> groups;
    std::vector<std::vector<uint32_t>> instance_of;  // per dump, per dump-local group: the index in `groups`
};
AlignedGroups align_groups(const DumpSet& set);

// An entry's op and shapes as one number, comparable across dumps (each dump interns its own strings).
class CallSignatures {
public:
    explicit CallSignatures(const DumpSet& set);
    uint64_t of(uint32_t dump, const flight::FlightEntry& e) const;

private:
    std::vector<std::vector<uint64_t>> op_hash_, shape_hash_;  // per dump, per string id / shapes index
};

}  // namespace us::hang
