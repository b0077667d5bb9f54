// The run description (run_info.h): to and from JSON, and read off a store's rank metadata.
#include "profiler/trace/run_info.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "profiler/event.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

nlohmann::json to_json(const RunInfo& info) {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : info.process_groups)
        groups.push_back({{"name", g.name},
                          {"desc", g.desc},
                          {"ranks", g.ranks},
                          {"kind", g.kind},
                          {"kind_from", g.kind_from},
                          {"group", g.group}});
    nlohmann::json clock = {{"method", info.clock_method}};
    if (info.clock_uncertainty_ns) clock["uncertainty_ns"] = *info.clock_uncertainty_ns;
    nlohmann::json j = {{"source", info.source},
                        {"ranks", info.ranks},
                        {"world_size", info.world_size},
                        {"process_groups", groups},
                        {"devices", info.devices},
                        {"clock", clock},
                        {"steps_from", info.steps_from},
                        {"kineto_step_offset", info.kineto_step_offset},
                        {"backend", info.backend},
                        {"files", info.files},
                        {"comm_backend", info.comm_backend},
                        {"grid", grid_json(info.grid)}};
    j["settings"] = info.settings ? *info.settings : nlohmann::json(nullptr);
    return j;
}

RunInfo run_info_from_json(const nlohmann::json& j) {
    RunInfo info;
    if (!j.is_object()) return info;
    info.source = j.value("source", std::string("engine"));
    if (j.contains("ranks") && j["ranks"].is_array())
        for (const auto& r : j["ranks"])
            if (r.is_number_integer()) info.ranks.push_back(r.get<int>());
    info.world_size = j.value("world_size", 0);
    if (j.contains("process_groups") && j["process_groups"].is_array())
        for (const auto& g : j["process_groups"]) {
            if (!g.is_object()) continue;
            ProcessGroupInfo p;
            p.name = g.value("name", std::string());
            p.desc = g.value("desc", std::string());
            if (g.contains("ranks") && g["ranks"].is_array())
                for (const auto& r : g["ranks"])
                    if (r.is_number_integer()) p.ranks.push_back(r.get<int>());
            p.kind = g.value("kind", std::string());
            p.kind_from = g.value("kind_from", std::string());
            p.group = g.value("group", 0);
            info.process_groups.push_back(std::move(p));
        }
    if (j.contains("devices") && j["devices"].is_array()) info.devices = j["devices"];
    if (j.contains("clock") && j["clock"].is_object()) {
        info.clock_method = j["clock"].value("method", std::string());
        if (j["clock"].contains("uncertainty_ns") && j["clock"]["uncertainty_ns"].is_number_integer())
            info.clock_uncertainty_ns = j["clock"]["uncertainty_ns"].get<int64_t>();
    }
    info.steps_from = j.value("steps_from", std::string());
    info.kineto_step_offset = j.value("kineto_step_offset", 0);
    if (j.contains("backend") && j["backend"].is_string()) info.backend = j["backend"].get<std::string>();
    if (j.contains("settings") && j["settings"].is_object()) info.settings = j["settings"];
    if (j.contains("comm_backend") && j["comm_backend"].is_string())
        info.comm_backend = j["comm_backend"].get<std::string>();
    if (j.contains("grid")) info.grid = grid_from_json<GridSizes>(j["grid"]);
    if (j.contains("files") && j["files"].is_array())
        for (const auto& f : j["files"])
            if (f.is_string()) info.files.push_back(f.get<std::string>());
    return info;
}

RunInfo imported_run_info(const RankTrace& rt) {
    if (!rt.info.imported() || !rt.info.run) return RunInfo{};
    return run_info_from_json(*rt.info.run);
}

RunInfo run_info_of(const TraceStore& store) {
    const RankMetadata& m = store.run_rank_metadata();
    RunInfo info;
    if (m.imported()) {
        info = run_info_from_json(m.run.value_or(nlohmann::json::object()));
        info.source = m.source;
        info.files.clear();
        for (int r : store.ranks())
            if (const auto& file = store.rank(r)->info.file) info.files.push_back(*file);
    } else {
        info.source = store.is_prediction() ? "planner" : "engine";
        info.settings = m.settings;
        info.backend = m.backend;
        info.comm_backend = m.comm_backend.value_or("");
        info.grid = m.grid;
        if (m.clock) {
            info.clock_method = m.clock->method.empty() ? "engine clock estimate" : m.clock->method;
            info.clock_uncertainty_ns = m.clock->uncertainty_ns;
        }
        info.steps_from = "engine";
    }
    info.ranks = store.ranks();
    info.world_size = store.world_size();
    return info;
}

std::string group_name(const RunInfo& info, int group) {
    if (group >= 0 && group < kGroupCount) return std::string(group_kind_name(GroupKind(group)));
    for (const auto& g : info.process_groups)
        if (g.group == group) {
            if (!g.kind.empty()) return g.kind + " (" + (g.desc.empty() ? g.name : g.desc) + ")";
            return g.desc.empty() ? "group " + g.name : g.desc;
        }
    return "group " + std::to_string(group);
}

int rank_from_file_name(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    for (size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
        size_t i = at + 4;
        if (i < name.size() && (name[i] == '-' || name[i] == '_')) ++i;
        int r = 0, digits = 0;
        for (; i < name.size() && std::isdigit(uint8_t(name[i])) && digits < 6; ++i, ++digits)
            r = r * 10 + (name[i] - '0');
        if (digits > 0 && (i >= name.size() || !std::isdigit(uint8_t(name[i])))) return r;
    }
    return -1;
}

}  // namespace us::prof
