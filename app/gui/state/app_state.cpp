#include "app/gui/state/app_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "app/launch/default_run.h"
#include "app/plan/predicted_trace.h"
#include "app/report/input_kind.h"
#include "common/core/check.h"
#include "profiler/trace/run_info.h"

namespace us::gui {

AppState::AppState(const GuiOptions& options) : source(log, options.store_cap_bytes), m_options(options) {
    // The command line's training flags, read by the trainer's parser, are the panel's first settings.
    const app::DefaultRun run = app::default_run(options.run.ranks, options.train_args);
    settings = LaunchSettings::from_args(run.args);
    settings.hosts = options.run.hosts;
    derived.set_report_options(options.report);
    m_pending = settings;
    if (!options.lesson.empty()) lessons.open(options.lesson);
    if (!options.plan_model.empty()) {
        planner.open = true;
        planner.model = options.plan_model;
        planner.cluster = options.plan_cluster;
        planner.gpus = options.plan_gpus;
        planner.launch_best_here = options.plan_launch;
        planner.show_best = options.plan_show;
        planner.start();
    }
    if (!options.open_trace.empty())
        open_trace(options.open_trace);
    else if (options.launch && lessons.current())
        lessons.launch(*this, 0, options.lesson_all_runs);
    else if (options.launch)
        launch();
    if (!options.listen.empty()) attach(options.listen);
    if (options.attach_job) {
        attach_job.agents = options.attach_agents;
        attach_job.token = options.attach_token;
        attach_job.auto_capture_steps = options.capture_steps;
        attach_job.auto_capture_count = options.capture_count;
        attach_job.timeout_s = options.capture_timeout_s;
        attach_job.show();
    }
}

AppState::~AppState() { derived.wait(); }

void AppState::leave_source() {
    derived.wait();
    if (const prof::TraceStore* s = store(); s && s->rank_count() > 0 && !comparison.current_archived) {
        refresh_derived(true);
        comparison.archive(derived.report(), derived.training(), source.label(), source.trace_path());
    }
}

std::optional<AppState::Checkpoint> AppState::last_checkpoint() const {
    const app::LiveRun* live = source.live();
    if (source.kind() != Source::launched || !live || launched_settings.config.save.empty()) return std::nullopt;
    const auto latest = live->store().latest_counter("checkpoint_step");
    if (!latest) return std::nullopt;
    return Checkpoint{int(latest->second.value), launched_settings.config.save};
}

void AppState::resume_from_checkpoint() {
    const auto checkpoint = last_checkpoint();
    if (!checkpoint) return;
    settings = launched_settings;
    settings.config.load = checkpoint->path;  // the same --steps: the schedule continues where it stopped
    log.message(fmt::format("resuming from {} (step {})", checkpoint->path, checkpoint->step));
    launch();
}

void AppState::launch() {
    if (const std::string why = settings.problem(); !why.empty()) {
        log.fail("cannot launch: " + why);
        return;
    }
    large_run.close();
    hang.close();  // a run of its own now; one that hangs hands its analysis over (HangState::show)
    stop();
    leave_source();
    const std::string label =
        fmt::format("run {}: {} ({} rank{})", m_run_counter + 1, describe_config(settings.resolve().to_json()),
                    settings.ranks(), settings.ranks() > 1 ? "s" : "");
    derived.reset();
    comparison.current_archived = false;
    if (!source.launch(settings, label)) return;
    log.error.clear();
    launched_settings = settings;
    ++m_run_counter;
    window.follow = true;
}

void AppState::stop() {
    derived.wait();  // a derived build may be reading the store that is about to change
    source.stop();
}

void AppState::attach(const std::string& listen) {
    large_run.close();
    hang.close();
    stop();
    leave_source();
    derived.reset();
    comparison.current_archived = false;
    if (!source.attach(listen)) return;
    log.error.clear();
    ++m_run_counter;
}

void AppState::detach() {
    if (source.kind() != Source::attached) return;
    stop();
    leave_source();
    source.close();
}

void AppState::adopt(std::unique_ptr<prof::TraceStore> store, const std::string& label, const std::string& path) {
    stop();
    leave_source();
    derived.reset();
    comparison.current_archived = false;
    // The launch panel now shows the opened run's settings: Relaunch reproduces it.
    if (const prof::RunInfo run = prof::run_info_of(*store); run.settings) {  // an imported run has none
        try {
            settings = settings.rerun(*run.settings);
        } catch (const std::exception& e) {
            log.message(std::string("the trace's settings could not be read into the launch panel: ") + e.what());
        }
    }
    source.adopt(std::move(store), label, path);
    log.error.clear();
    window.follow = false;
    // A run still loading gets its analyses once every rank is in (update_source); the timeline shows it now.
    if (!source.loading()) refresh_derived(true);
    if (const prof::TraceStore* s = this->store()) window.fit_all(*s);
    m_load_fit = {window.t0, window.t1};
}

void AppState::show_planned(size_t index) {
    if (!planner.result || index >= planner.result->search.ranked.size()) return;
    const PlannerState::Plan& p = *planner.result;
    const predict::PlanResult& r = p.search.ranked[index];
    try {
        large_run.close();
        adopt(plan::predicted_store(p.model, p.cluster, r, planner.gpus),
              fmt::format("{} on {} x {}: {}", p.model.name, planner.gpus, p.cluster.name, r.layout.describe()));
        planner.selected = int(index);
        planner.open = false;
    } catch (const UserError& e) {
        log.fail(e.what());
    }
}

void AppState::launch_planned(size_t index) {
    if (!planner.result || index >= planner.result->search.ranked.size()) return;
    const PlannerState::Plan& p = *planner.result;
    const predict::PlanResult& r = p.search.ranked[index];
    try {
        const app::HostOptions hosts = settings.hosts;
        settings = LaunchSettings::from_args({"--preset", p.model.name});
        predict::apply_layout(r.layout,
                              settings.config);  // the layout's settings on the preset's, no flag text between
        settings.hosts = hosts;
        launch();
        planner.selected = int(index);
        if (source.running()) {
            planner.launched = r;
            planner.launched_cluster = p.cluster.name;
            planner.launched_run = source.live();
        }
    } catch (const UserError& e) {
        log.fail(e.what());
    }
}

// A finished search, and what the command line asked to do with it (--plan-show, --plan-launch), whether or not
// the Planner is on screen.
void AppState::update_planner() {
    planner.poll();
    if (!planner.result) return;
    const auto& ranked = planner.result->search.ranked;
    auto first = [&](auto&& pick) {
        for (size_t i = 0; i < ranked.size(); ++i)
            if (ranked[i].fits && pick(ranked[i])) return i;
        return ranked.size();
    };
    if (planner.show_best) {
        planner.show_best = false;
        show_planned(first([](const predict::PlanResult&) { return true; }));
    }
    if (planner.launch_best_here) {
        planner.launch_best_here = false;
        launch_planned(first([&](const predict::PlanResult& r) { return runnable_here(planner.result->model, r); }));
    }
}

void AppState::open_trace(const std::vector<std::string>& paths, const std::string& label) {
    const app::InputKind kind = app::input_kind(paths);  // as `ultrascope report` tells them
    if (kind == app::InputKind::flight_dumps) {
        hang.open(paths);  // the run shown, if any, stays in the timeline beside the Hang view
    } else if (kind == app::InputKind::memory_snapshots) {
        snapshots.open(paths);
    } else if (LargeRun::wanted(paths)) {
        hang.close();
        stop();
        leave_source();
        source.close();
        large_run.open(paths, m_options.store_cap_bytes);
    } else {
        large_run.close();
        hang.close();
        source.open_trace(paths, label);
    }
}

RanksSource AppState::ranks_source() const {
    if (const prof::DigestReport* r = large_run.report())
        return RanksSource{&r->cross.digests, &r->cross.blame, &r->cross.core_sharing, true};
    return RanksSource{&report().cross.digests, &report().cross.blame, &report().cross.core_sharing, false};
}

std::string AppState::no_ranks_words() const {
    if (source.kind() == Source::none && !source.loading() && !log.error.empty())
        return log.error + " (File > Open another)";  // what was asked for could not be shown: say why here too
    return "no data yet";
}

Opened AppState::opened() const {
    WhatIsOpen w;
    w.hang = hang.active();
    w.from_digests = large_run.active();
    if (const prof::TraceStore* s = store(); s && s->rank_count() > 0) {
        w.imported = s->is_imported();
        w.ranks = int(s->rank_count());
    }
    // A run being read counts from the start, not from its first rank in: several files are a framework's ranks
    // (an Ultrascope trace is one file).
    if (const auto p = source.load_progress(); p && p->files_total > 1) {
        w.imported = true;
        w.ranks = std::max(w.ranks, int(p->files_total));
    }
    return opened_kind(w);
}

void AppState::open_ranks(const std::vector<int>& ranks, bool with_peers) {
    if (ranks.empty()) return;
    if (!large_run.report()) {
        window.focus_rank = ranks.front();
        window.selected_rank = ranks.front();
        return;
    }
    const std::vector<std::string> files = large_run.files_to_open(ranks, with_peers);
    if (files.empty()) return;
    stop();
    leave_source();
    source.open_trace(files);
    window.focus_rank = ranks.front();
}

void AppState::update() {
    if (auto error = snapshots.poll()) log.fail(*error);
    hang.poll();
    if (const auto captured = attach_job.poll(!source.loading() && !derived.busy()))
        open_trace({captured->folder}, captured->label);
    if (const auto failed = attach_job.take_failure()) log.fail(*failed);
    large_run.poll();
    update_planner();
    update_source();
    lessons.update(*this);
}

void AppState::update_source() {
    std::string path;
    if (auto loaded = source.take_loaded(path)) adopt(std::move(loaded), path, path);
    if (derived.busy()) refresh_derived(false);  // installs a finished build
    // A run being opened: the ranks read since the last frame join the shown store (never while a build reads it).
    // When the last arrives, the window fits the whole run unless the user has moved it meanwhile.
    if (source.loading() && !derived.busy() && source.pump_load() && store() &&
        std::pair{window.t0, window.t1} == m_load_fit)
        window.fit_all(*store());
    // The store stays as it is while a build reads it; what arrives meanwhile waits in the listener.
    if (source.live() && !derived.busy()) {
        source.pump();
        const app::LiveRun* live = source.live();
        if (source.kind() == Source::launched && live->finished() && !comparison.current_archived) {
            if (const int code = live->result_code(); code != 0) {
                std::string lost;
                for (const auto& l : live->lost_ranks()) lost += "; " + l;
                log.fail(fmt::format("the run failed (exit code {}){}", live->exit_code().value_or(-1), lost));
            } else {
                log.message("run finished: " + source.label());
            }
            refresh_derived(true);
            comparison.archive(derived.report(), derived.training(), source.label(), source.trace_path());
        }
    }
    if (!source.loading()) refresh_derived(false);  // a run being opened: once all its ranks are in
    // Auto-relaunch: once the settings have differed from the running ones and stayed put for 0.8 s.
    // The settings are checked once per change, not every frame (the check reads the preset file).
    if (!(settings == m_pending)) {
        m_pending = settings;
        m_pending_since = std::chrono::steady_clock::now();
        m_pending_checked = false;
    }
    if (!auto_relaunch || source.kind() == Source::file || source.kind() == Source::attached ||
        settings == launched_settings ||
        std::chrono::steady_clock::now() - m_pending_since < std::chrono::milliseconds(800))
        return;
    if (!m_pending_checked) {
        m_pending_checked = true;
        if (settings.problem().empty()) launch();
    }
}

void AppState::refresh_derived(bool force) {
    const prof::TraceStore* s = store();
    if (!s) return;
    std::string error;
    const bool installed = derived.refresh(*s, force, error);
    if (!error.empty()) log.fail(error);
    if (installed && window.follow) window.show_latest(*s, derived.report());
    if (auto h = derived.take_new_hang())  // a run that hung (live, or its trace opened): the Hang view shows why
        hang.show(std::move(h->analysis), std::move(h->dumps), source.label() + ": its ranks' flight recorder dumps");
}

int AppState::exit_code() const {
    const app::LiveRun* live = source.live();
    if (!log.error.empty() && source.kind() != Source::launched) return 2;
    if (live && source.kind() == Source::launched) return live->finished() ? live->result_code() : 1;
    return log.error.empty() ? 0 : 1;
}

}  // namespace us::gui
