// What the window shows, for the tests (shown_facts.h).
#include "app/gui/platform/shown_facts.h"

#include "app/gui/widgets/theme.h"
#include "app/gui/model/overlap_model.h"

#include <set>

namespace us::gui {

namespace {

nlohmann::json planner_facts(const PlannerState& planner) {
    const auto& ranked = planner.result->search.ranked;
    return {{"model", planner.result->model.name},
            {"layouts", ranked.size()},
            {"best", ranked.empty() ? "" : ranked.front().layout.describe()},
            {"best_fits", !ranked.empty() && ranked.front().fits},
            {"best_mfu", ranked.empty() ? 0.0 : ranked.front().mfu}};
}

// The overlap view's group names, with the nodes a group spans.
std::set<std::string> overlap_groups(const prof::Report& report) {
    std::set<std::string> groups;
    for (const auto& r : report.ranks)
        for (int g = 0; g < prof::kGroupCount; ++g)
            if (r.steady.group_bytes[size_t(g)] != 0) groups.insert(overlap_group_label(r, g));
    return groups;
}

// The snapshot window's figures (the first device of the one shown).
nlohmann::json snapshot_facts(const SnapshotState& snapshots) {
    const LoadedSnapshot& l = snapshots.snapshots()[size_t(snapshots.selected)];
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : l.analysis.devices)
        devices.push_back({{"device", d.device},
                           {"peak_allocated", d.peak_allocated},
                           {"reserved_bytes", d.reserved_bytes},
                           {"ooms", d.ooms.size()},
                           {"sites", d.sites.size()}});
    return {{"path", l.path}, {"snapshots", snapshots.snapshots().size()}, {"devices", devices}};
}

nlohmann::json lesson_facts(const AppState& app, const lesson::Lesson& l) {
    nlohmann::json claims = nlohmann::json::array();
    const auto& check = app.lessons.check();
    for (size_t i = 0; i < l.claims.size(); ++i) {
        const bool ready = app.lessons.claim_ready(l.claims[i]);
        const lesson::ClaimResult* r = check && i < check->claims.size() ? &check->claims[i] : nullptr;
        claims.push_back({{"says", l.claims[i].says},
                          {"status", !ready || !r                                 ? "waiting"
                                     : r->status == lesson::ClaimStatus::held     ? "held"
                                     : r->status == lesson::ClaimStatus::failed   ? "failed"
                                     : r->status == lesson::ClaimStatus::not_here ? "not here"
                                                                                  : "invalid"}});
    }
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& [label, report] : app.lessons.reports()) runs.push_back(label);
    return {
        {"name", l.name}, {"runs_measured", runs}, {"claims", claims}, {"compared_runs", app.comparison.runs.size()}};
}

// What the views of the run shown say: the Ranks view's verdict, a planned layout launched beside its prediction.
void run_facts(const AppState& app, nlohmann::json& facts) {
    if (const RanksSource r = app.ranks_source(); r.digests && r.blame) {  // the Ranks view's run
        const bool named = r.blame->culprit && !r.blame->stragglers.empty();
        facts["ranks_view"] = {
            {"ranks", r.digests->size()},
            {"from_digests", r.from_digests},
            {"verdict", r.blame->verdict},
            {"oversubscribed", r.core_sharing ? prof::oversubscribed_words(*r.core_sharing) : ""},
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
}

// The Hang view's analysis, and the grid it drew for the group picked (when it drew one).
nlohmann::json hang_facts(const HangState& st) {
    const LoadedHang& l = *st.loaded();
    const hang::HangAnalysis& a = l.analysis;
    nlohmann::json facts = {
        {"label", l.label},
        {"dumps", l.dumps.dumps.size()},
        {"left_out", l.dumps.left_out.size()},
        {"kind", hang::hang_kind_name(a.kind)},
        {"verdict", a.verdict},
        {"culprit_ranks", a.culprit_ranks},
        {"group", st.group >= 0 ? nlohmann::json(a.groups[size_t(st.group)].name) : nlohmann::json()},
        {"picked_rank", st.picked_rank}};
    if (const HangGrid* g = st.grid_made()) {
        nlohmann::json bands = nlohmann::json::array();
        for (const HangBand& b : g->bands)
            bands.push_back({{"label", b.label}, {"progress", b.progress}, {"culprit", b.culprit}});
        facts["grid"] = {{"seqs", g->seqs}, {"divergence", g->divergence}, {"members", g->members}, {"bands", bands}};
    }
    return facts;
}

// The Attach window: the jobs listed with their ranks, the capture's progress or error, the runs compared.
nlohmann::json attach_facts(const AppState& app) {
    const AttachState& st = app.attach_job;
    nlohmann::json jobs = nlohmann::json::array();
    for (const ListedJob& j : st.listing.jobs()) {
        nlohmann::json ranks = nlohmann::json::array();
        for (const ListedRank& r : j.ranks)
            ranks.push_back({{"rank", r.rank}, {"pid", r.pid}, {"host", r.host}, {"alive", r.alive}});
        jobs.push_back({{"id", j.id},
                        {"node", j.node},
                        {"describe", j.describe},
                        {"ranks", ranks},
                        {"captures", st.captures_of(j.id)}});
    }
    nlohmann::json compared = nlohmann::json::array();
    for (const RunSummary& r : app.comparison.runs) compared.push_back(r.label);
    nlohmann::json progress = nlohmann::json::array();
    for (const CaptureRankRow& r : st.worker.progress().ranks) progress.push_back(r.line);
    return {{"where", st.listing.where()},
            {"listing_error", st.listing.error()},
            {"jobs", jobs},
            {"capturing", st.worker.running()},
            {"progress", progress},
            {"error", st.error},
            {"compared_runs", compared}};
}

}  // namespace

nlohmann::json shown_facts(const AppState& app) {
    nlohmann::json facts = nlohmann::json::object();
    if (const auto checkpoint = app.last_checkpoint()) {
        facts["last_checkpoint_step"] = checkpoint->step;
        facts["last_checkpoint_path"] = checkpoint->path;
    }
    facts["launch_args"] = app.settings.train_args();
    facts["font_px"] = font_px();
    facts["layout"] = app.layout().name;
    facts["source"] = {{"label", app.source.label()},
                       {"provenance", app.provenance()},
                       {"ranks", app.store() ? app.store()->ranks().size() : size_t(0)},
                       {"step_s", app.report().throughput.step_s},
                       {"mfu", app.report().throughput.mfu}};
    if (app.planner.result) facts["planner"] = planner_facts(app.planner);
    if (!app.planner.error.empty()) facts["planner_error"] = app.planner.error;
    facts["overlap_groups"] = overlap_groups(app.report());
    if (!app.snapshots.empty()) facts["snapshot"] = snapshot_facts(app.snapshots);
    if (app.hang.loaded()) facts["hang"] = hang_facts(app.hang);
    if (app.attach_job.open || app.attach_job.listing.started()) facts["attach"] = attach_facts(app);
    if (auto categories = app.views.memory_categories.facts(); !categories.is_null())
        facts["memory_categories"] = categories;
    run_facts(app, facts);
    if (const lesson::Lesson* l = app.lessons.current()) facts["lesson"] = lesson_facts(app, *l);
    if (const prof::TraceStore* store = app.store()) {
        facts["store_bytes"] = store->bytes_used();
        facts["store_cap_bytes"] = store->options().max_bytes;
        facts["store_at_cap"] = store->at_cap();
    }
    return facts;
}

}  // namespace us::gui
