// What the window shows, for the tests (shown_facts.h).
#include "app/gui/platform/shown_facts.h"

#include "app/gui/widgets/theme.h"
#include "app/gui/model/overlap_model.h"

#include <set>

namespace us::gui {

nlohmann::json shown_facts(const AppState& app) {
    nlohmann::json facts = nlohmann::json::object();
    if (const auto checkpoint = app.last_checkpoint()) {
        facts["last_checkpoint_step"] = checkpoint->step;
        facts["last_checkpoint_path"] = checkpoint->path;
    }
    facts["launch_args"] = app.settings.train_args();
    facts["font_px"] = font_px();
    facts["source"] = {{"label", app.source.label()},
                       {"provenance", app.provenance()},
                       {"ranks", app.store() ? app.store()->ranks().size() : size_t(0)},
                       {"step_s", app.report().throughput.step_s},
                       {"mfu", app.report().throughput.mfu}};
    if (app.planner.result) {
        const auto& ranked = app.planner.result->search.ranked;
        facts["planner"] = {{"model", app.planner.result->model.name},
                            {"layouts", ranked.size()},
                            {"best", ranked.empty() ? "" : ranked.front().layout.describe()},
                            {"best_fits", !ranked.empty() && ranked.front().fits},
                            {"best_mfu", ranked.empty() ? 0.0 : ranked.front().mfu}};
    }
    if (!app.planner.error.empty()) facts["planner_error"] = app.planner.error;
    {  // the overlap view's group names, with the nodes a group spans
        std::set<std::string> groups;
        for (const auto& r : app.report().ranks)
            for (int g = 0; g < prof::kGroupCount; ++g)
                if (r.steady.group_bytes[size_t(g)] != 0) groups.insert(overlap_group_label(r, g));
        facts["overlap_groups"] = groups;
    }
    if (!app.snapshots.empty()) {  // the snapshot window's figures (the first device of the one shown)
        const LoadedSnapshot& l = app.snapshots.snapshots()[size_t(app.snapshots.selected)];
        nlohmann::json devices = nlohmann::json::array();
        for (const auto& d : l.analysis.devices)
            devices.push_back({{"device", d.device},
                               {"peak_allocated", d.peak_allocated},
                               {"reserved_bytes", d.reserved_bytes},
                               {"ooms", d.ooms.size()},
                               {"sites", d.sites.size()}});
        facts["snapshot"] = {{"path", l.path}, {"snapshots", app.snapshots.snapshots().size()}, {"devices", devices}};
    }
    if (auto categories = app.views.memory_categories.facts(); !categories.is_null()) facts["memory_categories"] = categories;
    if (const RanksSource r = app.ranks_source(); r.digests && r.blame) {  // the Ranks view's run
        const bool named = r.blame->culprit && !r.blame->stragglers.empty();
        facts["ranks_view"] = {
            {"ranks", r.digests->size()},
            {"from_digests", r.from_digests},
            {"verdict", r.blame->verdict},
            {"culprit", named ? nlohmann::json(r.blame->stragglers.front().rank) : nlohmann::json()}};
    }
    if (const auto& l = app.planner.launched; l && app.source.live() == app.planner.launched_run) {
        const int64_t measured = measured_modelled_peak(app.report(), l->memory);
        facts["planner_launched"] = {{"layout", l->layout.describe()},
                                     {"ranks", l->layout.world()},
                                     {"memory_predicted", l->memory.categories_total()},
                                     {"memory_measured", measured},
                                     {"step_s_measured", app.report().throughput.step_s}};
    }
    if (const lesson::Lesson* l = app.lessons.current()) {
        nlohmann::json claims = nlohmann::json::array();
        const auto& check = app.lessons.check();
        for (size_t i = 0; i < l->claims.size(); ++i) {
            const bool ready = app.lessons.claim_ready(l->claims[i]);
            const lesson::ClaimResult* r = check && i < check->claims.size() ? &check->claims[i] : nullptr;
            claims.push_back({{"says", l->claims[i].says},
                              {"status", !ready || !r                               ? "waiting"
                                         : r->status == lesson::ClaimStatus::held   ? "held"
                                         : r->status == lesson::ClaimStatus::failed ? "failed"
                                                                                    : "invalid"}});
        }
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& [label, report] : app.lessons.reports()) runs.push_back(label);
        facts["lesson"] = {{"name", l->name},
                           {"runs_measured", runs},
                           {"claims", claims},
                           {"compared_runs", app.comparison.runs.size()}};
    }
    if (const prof::TraceStore* store = app.store()) {
        facts["store_bytes"] = store->bytes_used();
        facts["store_cap_bytes"] = store->options().max_bytes;
        facts["store_at_cap"] = store->at_cap();
    }
    return facts;
}

}  // namespace us::gui
