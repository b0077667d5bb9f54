// Process groups and the rank's metadata of an imported Kineto trace (kineto_groups.h).
#include "profiler/import/kineto_groups.h"

#include <algorithm>

#include "profiler/event.h"
#include "profiler/import/kineto_names.h"

namespace us::prof {

namespace {

std::vector<int> ranks_of(const nlohmann::json& j) {
    std::vector<int> out;
    if (j.is_array())
        for (const auto& r : j)
            if (r.is_number_integer() && out.size() < 100000) out.push_back(r.get<int>());
    return out;
}

ProcessGroupInfo* find_group(std::vector<ProcessGroupInfo>& groups, const std::string& name) {
    for (auto& g : groups)
        if (g.name == name) return &g;
    return nullptr;
}

}  // namespace

KinetoGroups identify_groups(const KinetoFile& f, int rank, const std::vector<bool>& p2p_groups) {
    KinetoGroups out;
    const nlohmann::json& d = f.distributed_info;
    if (d.is_object()) {
        if (d.contains("world_size") && d["world_size"].is_number_integer())
            out.world_size = d["world_size"].get<int>();
        if (d.contains("backend") && d["backend"].is_string()) out.backend = d["backend"].get<std::string>();
        // pg_config: a list of {pg_name, pg_desc, ranks ...}, or an object of them by name.
        if (d.contains("pg_config") && (d["pg_config"].is_array() || d["pg_config"].is_object()))
            for (const auto& item : d["pg_config"].items()) {
                const auto& pg = item.value();
                if (!pg.is_object()) continue;
                ProcessGroupInfo g;
                g.name = pg.contains("pg_name") && pg["pg_name"].is_string()
                             ? pg["pg_name"].get<std::string>()
                             : (d["pg_config"].is_object() ? item.key() : "");
                g.desc = pg.contains("pg_desc") && pg["pg_desc"].is_string() ? pg["pg_desc"].get<std::string>() : "";
                if (pg.contains("ranks")) g.ranks = ranks_of(pg["ranks"]);
                if (out.groups.size() < 200) out.groups.push_back(std::move(g));
            }
    }
    // Groups only the collectives' args name.
    std::vector<int> index_of_seen(f.groups.size(), -1);
    for (size_t i = 0; i < f.groups.size(); ++i) {
        const KinetoGroupSeen& seen = f.groups[i];
        ProcessGroupInfo* g = find_group(out.groups, seen.name);
        if (!g) {
            out.groups.push_back({seen.name, seen.desc, {}, "", "", 0});
            g = &out.groups.back();
        }
        if (g->desc.empty()) g->desc = seen.desc;
        if (g->ranks.empty() && !seen.ranks_json.empty()) {
            try {
                g->ranks = ranks_of(nlohmann::json::parse(seen.ranks_json));
            } catch (const nlohmann::json::exception&) {
                out.warnings.push_back("process group " + seen.name + ": its ranks are not a JSON list");
            }
        }
        index_of_seen[i] = int(g - out.groups.data());
    }
    // The parallelism of each group, and its id.
    bool all_ranks_known = out.world_size > 0;
    int next_other = kGroupCount;
    for (size_t i = 0; i < out.groups.size(); ++i) {
        ProcessGroupInfo& g = out.groups[i];
        const std::string_view kind = group_kind_of_description(g.desc.empty() ? g.name : g.desc);
        std::vector<int> sorted = g.ranks;
        std::sort(sorted.begin(), sorted.end());
        bool is_world = all_ranks_known && int(sorted.size()) == out.world_size;
        for (size_t k = 0; is_world && k < sorted.size(); ++k) is_world = sorted[k] == int(k);
        bool p2p = false;
        for (size_t s = 0; s < f.groups.size(); ++s) p2p |= index_of_seen[s] == int(i) && p2p_groups[s];
        if (!kind.empty())
            g.kind = std::string(kind), g.kind_from = "description";
        else if (is_world)
            g.kind = "world", g.kind_from = "rank pattern (all ranks)";
        else if (p2p)
            g.kind = "pp", g.kind_from = "send/recv neighbours";
        const std::optional<GroupKind> known = parse_group_kind(g.kind);
        g.group = known ? int(*known) : std::min(next_other++, 255);
    }
    out.group_ids.assign(f.groups.size(), 0);
    for (size_t s = 0; s < f.groups.size(); ++s) out.group_ids[s] = uint8_t(out.groups[size_t(index_of_seen[s])].group);
    (void)rank;
    return out;
}

RankMetadata kineto_rank_metadata(const KinetoFile& f, int rank, const std::string& rank_from,
                                  const KinetoGroups& groups, const std::string& steps_from) {
    RunInfo info;
    info.source = "kineto";
    info.world_size = groups.world_size;
    info.process_groups = groups.groups;
    if (f.device_properties.is_array()) info.devices = f.device_properties;
    info.clock_method =
        "Kineto timestamps: the host's clock (ranks on one host share it; ranks on different hosts "
        "are not aligned)";
    info.steps_from = steps_from;
    info.kineto_step_offset = 1;
    info.backend = groups.backend;
    info.files = {f.path};
    info.ranks = {rank};
    RankMetadata m;
    m.source = "kineto";
    m.rank = rank;
    m.world_size = std::max(groups.world_size, 0);  // 0: unknown, the store counts the ranks it has
    m.file = f.path;
    m.rank_from = rank_from;
    m.versions = f.versions.is_object() ? f.versions : nlohmann::json::object();
    // Kineto writes the recording machine's name as the top-level "host_name" (kept among the small scalars)
    if (const auto host = m.versions.find("host_name"); host != m.versions.end() && host->is_string())
        m.host = host->get<std::string>();
    if (f.distributed_info.is_object())
        for (const auto& [k, v] : f.distributed_info.items())
            if (k.find("version") != std::string::npos) m.versions[k] = v;
    m.run = to_json(info);
    return m;
}

}  // namespace us::prof
