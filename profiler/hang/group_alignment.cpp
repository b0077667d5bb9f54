// Regrouping the dumps' entries per process-group instance (group_alignment.h).
#include "profiler/hang/group_alignment.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <unordered_map>

namespace us::hang {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
}

uint64_t hash_shapes(const flight::FlightDump& d, const flight::TensorShapes& s) {
    uint64_t h = 1469598103934665603ull;
    for (const auto* sizes : {&s.input_sizes, &s.output_sizes}) {
        h = mix(h, sizes->size());
        for (const auto& t : *sizes) {
            h = mix(h, t.size());
            for (int64_t x : t) h = mix(h, uint64_t(x));
        }
    }
    for (const auto* dtypes : {&s.input_dtypes, &s.output_dtypes}) {
        h = mix(h, dtypes->size());
        for (flight::StringId id : *dtypes) h = mix(h, std::hash<std::string>{}(d.text(id)));
    }
    return h;
}

}  // namespace

AlignedGroups align_groups(const DumpSet& set) {
    AlignedGroups aligned;
    std::vector<GroupInstance>& groups = aligned.groups;
    aligned.instance_of.resize(set.dumps.size());
    std::unordered_map<std::string, uint32_t> index;  // name '\0' desc -> group
    for (uint32_t di = 0; di < set.dumps.size(); ++di) {
        const flight::FlightDump& d = set.dumps[di];
        // This dump's groups mapped to instances once; then its entries are dealt out.
        std::vector<uint32_t>& instance = aligned.instance_of[di];
        instance.resize(d.groups.size());
        std::vector<uint32_t> member(d.groups.size());
        for (uint32_t g = 0; g < d.groups.size(); ++g) {
            std::string key = d.group_name(g);
            key += '\0';
            key += d.group_desc(g);
            auto [it, added] = index.try_emplace(std::move(key), uint32_t(groups.size()));
            if (added) groups.push_back({d.group_name(g), d.group_desc(g), {}, {}});
            instance[g] = it->second;
            GroupInstance& gi = groups[it->second];
            // One member per dump, even where a dump names one group twice.
            if (gi.members.empty() || gi.members.back().dump != di) gi.members.push_back({di, {}, {}, false});
            member[g] = uint32_t(gi.members.size() - 1);
        }
        for (uint32_t i = 0; i < d.entries.size(); ++i) {
            const flight::FlightEntry& e = d.entries[i];
            MemberEntries& m = groups[instance[e.group]].members[member[e.group]];
            (e.is_p2p ? m.p2p : m.collectives).push_back(i);
        }
        for (uint32_t g = 0; g < d.groups.size(); ++g) {
            MemberEntries& m = groups[instance[g]].members[member[g]];
            if (m.sorted) continue;
            m.sorted = true;
            // Record order is sequence order; a buffer that wrapped is still in record order.
            auto by = [&](auto seq) {
                return [&d, seq](uint32_t a, uint32_t b) { return d.entries[a].*seq < d.entries[b].*seq; };
            };
            if (!std::is_sorted(m.collectives.begin(), m.collectives.end(),
                                by(&flight::FlightEntry::collective_seq_id)))
                std::stable_sort(m.collectives.begin(), m.collectives.end(),
                                 by(&flight::FlightEntry::collective_seq_id));
            if (!std::is_sorted(m.p2p.begin(), m.p2p.end(), by(&flight::FlightEntry::p2p_seq_id)))
                std::stable_sort(m.p2p.begin(), m.p2p.end(), by(&flight::FlightEntry::p2p_seq_id));
        }
    }
    // Whole memberships from pg_config, where a dump gives a group by its name with its ranks (NCCL, the engine).
    for (const flight::FlightDump& d : set.dumps)
        for (const flight::GroupConfig& c : d.pg_config) {
            if (c.name.empty() || c.ranks.empty()) continue;  // gloo's single '' key: the last group made, not this one
            std::string key = c.name;
            key += '\0';
            key += c.desc;
            const auto it = index.find(key);
            if (it != index.end() && groups[it->second].config_ranks.empty()) groups[it->second].config_ranks = c.ranks;
        }
    return aligned;
}

CallSignatures::CallSignatures(const DumpSet& set) : op_hash_(set.dumps.size()), shape_hash_(set.dumps.size()) {
    for (size_t i = 0; i < set.dumps.size(); ++i) {
        const flight::FlightDump& d = set.dumps[i];
        for (const std::string& s : d.strings) op_hash_[i].push_back(std::hash<std::string>{}(s));
        for (const flight::TensorShapes& s : d.shapes) shape_hash_[i].push_back(hash_shapes(d, s));
    }
}

uint64_t CallSignatures::of(uint32_t dump, const flight::FlightEntry& e) const {
    return mix(op_hash_[dump][e.op], shape_hash_[dump][e.shapes]);
}

}  // namespace us::hang
