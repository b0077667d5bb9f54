// The run panel: where the data comes from, the launch settings (widgets/launch_form.h) with validation as you type,
// Launch / Stop / Relaunch and auto-relaunch, what the formulas predict for the settings, and the run's messages.
// Beside a trace of several ranks from elsewhere the settings fold under "launch a run" (model/opening_layout.h).
#include <fmt/format.h>
#include <imgui.h>

#include <map>

#include "app/gui/views/views.h"
#include "app/gui/widgets/launch_form.h"
#include "app/gui/widgets/theme.h"
#include "profiler/trace/run_info.h"

namespace us::gui {

namespace {

uint64_t total_dropped_events(const prof::TraceStore& store) {
    uint64_t n = 0;
    for (int r : store.ranks()) n += store.rank(r)->dropped_events;
    return n;
}

// A PyTorch run shown: what it is, as its files describe it (the launch form below is for a run of the engine's).
void draw_imported_description(const prof::RunInfo& run) {
    const ImVec4 info(0.6f, 0.8f, 1, 1), dim(0.7f, 0.7f, 0.7f, 1);
    ImGui::TextColored(info, "viewing a PyTorch profiler trace (measured)");
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(dim, "%zu rank file(s) of a world of %s, backend %s; steps from %s", run.files.size(),
                       run.world_size > 0 ? std::to_string(run.world_size).c_str() : "unknown size",
                       run.backend.empty() ? "unknown" : run.backend.c_str(), run.steps_from.c_str());
    for (const prof::ProcessGroupInfo& g : run.process_groups)
        ImGui::TextColored(dim, "process group %s '%s': %zu ranks, %s", g.name.c_str(), g.desc.c_str(), g.ranks.size(),
                           g.kind.empty() ? "parallelism unknown" : g.kind.c_str());
    std::map<std::string, int> devices;  // the node's GPUs as deviceProperties lists them, by name
    for (const auto& d : run.devices)
        if (d.is_object() && d.contains("name") && d["name"].is_string()) ++devices[d["name"].get<std::string>()];
    for (const auto& [name, count] : devices) ImGui::TextColored(dim, "devices: %d x %s", count, name.c_str());
    if (run.devices.empty()) ImGui::TextColored(dim, "devices: none recorded (a CPU run, or no deviceProperties)");
    ImGui::TextColored(dim, "settings, predictions and MFU: unknown for a PyTorch trace");
    ImGui::PopTextWrapPos();
}

// A run launched here: running or how it ended, its trace, and its last checkpoint to resume a failed run from.
void draw_launched_status(AppState& app, const app::LiveRun* live) {
    if (live && !live->finished()) {
        ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "running  %.0f s", live->seconds());
    } else if (live) {
        const bool ok = live->result_code() == 0;
        ImGui::TextColored(ok ? ImVec4(0.6f, 0.8f, 1, 1) : ImVec4(1, 0.45f, 0.4f, 1),
                           ok ? "finished" : "failed (exit %d)", live->exit_code().value_or(-1));
    }
    if (live) ImGui::TextWrapped("trace: %s", live->trace_path().c_str());
    const auto checkpoint = app.last_checkpoint();
    if (!checkpoint) return;
    ImGui::TextWrapped("last checkpoint: step %d, %s", checkpoint->step, checkpoint->path.c_str());
    if (!live || !live->finished() || live->result_code() == 0) return;
    if (ImGui::SmallButton("Resume from it")) app.resume_from_checkpoint();
    const ImVec2 at = ImGui::GetItemRectMin(), size = ImGui::GetItemRectSize();
    app.regions["resume"] = ViewRegion{at.x, at.y, size.x, size.y};
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "relaunch the same settings with --load %s: the run continues from step %d\n"
            "exactly as if it had not stopped (same --steps, same schedule)",
            checkpoint->path.c_str(), checkpoint->step);
}

// Listening for ranks started elsewhere: the port, and the command that starts them.
void draw_attached_status(const app::LiveRun* live) {
    ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "listening on port %d", live ? live->port() : 0);
    if (!live) return;
    ImGui::TextWrapped("Start ranks with ULTRASCOPE_TOKEN=%s and --connect <this host>:%d", live->token().c_str(),
                       live->port());
    if (ImGui::SmallButton("Copy command"))
        ImGui::SetClipboardText(
            fmt::format("ULTRASCOPE_TOKEN={} mpirun -n 2 ultrascope-train --dp 2 --connect 127.0.0.1:{}", live->token(),
                        live->port())
                .c_str());
}

// Where the data comes from.
void draw_source_status(AppState& app) {
    const app::LiveRun* live = app.source.live();
    switch (app.source.kind()) {
        case Source::launched:
            return draw_launched_status(app, live);
        case Source::attached:
            return draw_attached_status(live);
        case Source::file:
            if (app.showing_prediction())
                ImGui::TextColored(kPredictedColor, "viewing the planner's prediction (File > New plan)");
            else if (const prof::TraceStore* store = app.store();
                     store && store->rank_count() > 0 && store->is_imported())
                draw_imported_description(prof::run_info_of(*store));
            else
                ImGui::TextColored(ImVec4(0.6f, 0.8f, 1, 1), "viewing a trace file");
            return;
        default:
            if (app.hang.active()) {  // a hung job's dumps, no trace beside them
                ImGui::PushTextWrapPos(0);
                ImGui::TextColored(ImVec4(0.6f, 0.8f, 1, 1), "viewing %s (the Hang view; measured)",
                                   app.hang.loaded() ? app.hang.loaded()->label.c_str() : "Flight Recorder dumps");
                ImGui::PopTextWrapPos();
                return;
            }
            ImGui::TextUnformatted(app.source.loading() ? "loading the trace..."
                                                        : "nothing loaded: launch a run or open a trace");
    }
}

// The store's memory against its cap, always visible; reaching it is a warning, never a silent loss.
void draw_store_status(const prof::TraceStore& store) {
    const double used = double(store.bytes_used()) / double(1 << 20), cap = double(store.options().max_bytes >> 20);
    if (!store.at_cap()) {
        ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1), "trace in memory: %.0f of %.0f MiB (measured)", used, cap);
    } else {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1),
                           "trace in memory reached its cap of %.0f MiB at step %d: %llu op spans and %llu memory "
                           "events since are not kept here (the trace file has them all; --store-cap-mib raises it)",
                           cap, store.cap_reached_at_step(), (unsigned long long)store.spans_dropped_by_cap(),
                           (unsigned long long)store.memory_events_dropped_by_cap());
        ImGui::PopTextWrapPos();
    }
    if (const uint64_t dropped = store.rank_count() > 0 ? total_dropped_events(store) : 0; dropped > 0)
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "%llu events dropped by the ranks' recorders (ring full)",
                           (unsigned long long)dropped);
}

// The one error the user must see, in a red box until dismissed.
void draw_error(AppState& app) {
    ImGui::PushStyleColor(ImGuiCol_ChildBg, ImVec4(0.35f, 0.08f, 0.08f, 1));
    ImGui::BeginChild("error", ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * 4.5f), true);
    const ImVec2 at = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    app.regions["error"] = ViewRegion{at.x, at.y, size.x, size.y};
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.8f, 0.75f, 1), "%s", app.log.error.c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::SmallButton("dismiss")) app.log.error.clear();
    ImGui::EndChild();
    ImGui::PopStyleColor();
}

void draw_status(AppState& app) {
    draw_source_status(app);
    if (const prof::TraceStore* store = app.store()) draw_store_status(*store);
    if (!app.log.error.empty()) draw_error(app);
}

// Validation as you type: resolved only when the settings change (it reads the preset file).
void check_settings(LaunchPanelState& panel, const LaunchSettings& s) {
    if (panel.checked_once && panel.checked == s) return;
    panel.checked_once = true;
    panel.checked = s;
    panel.problem = s.problem();
    panel.prediction = panel.problem.empty() ? settings_prediction(s) : std::string();
}

// The settings' verdict: the ranks they make and what the formulas predict, or why they cannot be launched.
void draw_check(const AppState& app, const LaunchPanelState& panel) {
    const LaunchSettings& s = app.settings;
    const ParallelLayout& p = s.config.parallel;
    if (!panel.problem.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "%s", panel.problem.c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.5f, 1), "ok: %d rank(s) = dp %d x pp %d x tp %d x cp %d%s", s.ranks(),
                       p.dp, p.pp, p.tp, p.cp, p.ep > 1 ? fmt::format(" (ep {} within dp)", p.ep).c_str() : "");
    // Under a PyTorch run the form's prediction would read as the run's: it is the form's, for a run to launch.
    const prof::TraceStore* shown = app.store();
    if (shown && shown->rank_count() > 0 && shown->is_imported())
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1),
                           "(the prediction of these settings shows when the run shown is the engine's)");
    else
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", panel.prediction.c_str());
}

void draw_launch_buttons(AppState& app, const LaunchPanelState& panel) {
    ImGui::BeginDisabled(!panel.problem.empty());
    if (ImGui::Button(app.source.running() ? "Relaunch" : "Launch")) app.launch();
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::BeginDisabled(!app.source.running());
    if (ImGui::Button("Stop")) app.stop();
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::Checkbox("auto-relaunch", &app.auto_relaunch);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("relaunch whenever a setting changes (after it settles)");
}

// The form, its check, and the buttons that launch it.
void draw_settings(AppState& app) {
    LaunchPanelState& panel = app.views.launch;
    draw_launch_form(app.settings, panel);
    check_settings(panel, app.settings);
    draw_check(app, panel);
    draw_launch_buttons(app, panel);
}

}  // namespace

void draw_launch_panel(AppState& app) {
    draw_status(app);
    ImGui::Separator();
    // Beside a trace from elsewhere the settings are for a run to launch, not the one shown: folded (opening_layout.h).
    if (!app.layout().launch_folded)
        draw_settings(app);
    else if (ImGui::CollapsingHeader("launch a run"))
        draw_settings(app);
    ImGui::Separator();
    ImGui::TextUnformatted("Messages");
    ImGui::BeginChild("log", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
    for (const auto& line : app.log.lines) ImGui::TextUnformatted(line.c_str());
    if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4) ImGui::SetScrollHereY(1.0f);
    ImGui::EndChild();
}

}  // namespace us::gui
