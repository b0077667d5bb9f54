// The run panel: where the data comes from, the launch settings with validation as you type, Launch / Stop /
// Relaunch and auto-relaunch, what the formulas predict for the settings, and the run's messages.
#include <fmt/format.h>
#include <imgui.h>

#include <map>

#include "app/gui/theme.h"
#include "app/gui/views.h"
#include "profiler/trace/run_info.h"
#include "common/core/format.h"
#include "common/core/memory_category.h"
#include "common/settings/settings_explained.h"
#include "common/settings/settings_schema.h"
#include "profiler/predict/predict.h"

namespace us::gui {

namespace {

uint64_t total_dropped_events(const prof::TraceStore& store) {
    uint64_t n = 0;
    for (int r : store.ranks()) n += store.rank(r)->dropped_events;
    return n;
}

// The hovered widget's tooltip: the setting's help line, flag and explanation, from the settings table
// (common/settings/settings_explained.h).
void setting_tip(std::string_view key) {
    setting(key);  // every frame, not only on hover: a key the table lacks fails at once
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", setting_tooltip(key).c_str());
}

void int_field(const char* label, int& v, int min, int max, std::string_view key) {
    ImGui::SetNextItemWidth(em(110));
    if (ImGui::InputInt(label, &v)) v = std::clamp(v, min, max);
    setting_tip(key);
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

void draw_status(AppState& app) {
    const app::LiveRun* live = app.source.live();
    switch (app.source.kind()) {
        case Source::launched:
            if (live && !live->finished()) {
                ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "running  %.0f s", live->seconds());
            } else if (live) {
                const bool ok = live->result_code() == 0;
                ImGui::TextColored(ok ? ImVec4(0.6f, 0.8f, 1, 1) : ImVec4(1, 0.45f, 0.4f, 1),
                                   ok ? "finished" : "failed (exit %d)", live->exit_code().value_or(-1));
            }
            if (live) ImGui::TextWrapped("trace: %s", live->trace_path().c_str());
            if (const auto checkpoint = app.last_checkpoint()) {
                ImGui::TextWrapped("last checkpoint: step %d, %s", checkpoint->step, checkpoint->path.c_str());
                if (live && live->finished() && live->result_code() != 0) {
                    if (ImGui::SmallButton("Resume from it")) app.resume_from_checkpoint();
                    const ImVec2 at = ImGui::GetItemRectMin(), size = ImGui::GetItemRectSize();
                    app.regions["resume"] = ViewRegion{at.x, at.y, size.x, size.y};
                    if (ImGui::IsItemHovered())
                        ImGui::SetTooltip(
                            "relaunch the same settings with --load %s: the run continues from step %d\n"
                            "exactly as if it had not stopped (same --steps, same schedule)",
                            checkpoint->path.c_str(), checkpoint->step);
                }
            }
            break;
        case Source::attached:
            ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "listening on port %d", live ? live->port() : 0);
            if (live) {
                ImGui::TextWrapped("Start ranks with ULTRASCOPE_TOKEN=%s and --connect <this host>:%d",
                                   live->token().c_str(), live->port());
                if (ImGui::SmallButton("Copy command")) {
                    ImGui::SetClipboardText(
                        fmt::format("ULTRASCOPE_TOKEN={} mpirun -n 2 ultrascope-train --dp 2 --connect 127.0.0.1:{}",
                                    live->token(), live->port())
                            .c_str());
                }
            }
            break;
        case Source::file:
            if (app.showing_prediction())
                ImGui::TextColored(kPredictedColor, "viewing the planner's prediction (File > New plan)");
            else if (const prof::TraceStore* store = app.store();
                     store && store->rank_count() > 0 && store->is_imported())
                draw_imported_description(prof::run_info_of(*store));
            else
                ImGui::TextColored(ImVec4(0.6f, 0.8f, 1, 1), "viewing a trace file");
            break;
        default:
            ImGui::TextUnformatted(app.source.loading() ? "loading the trace..."
                                                        : "nothing loaded: launch a run or open a trace");
    }
    if (const prof::TraceStore* store = app.store()) {
        // The store's memory against its cap, always visible; reaching it is a warning, never a silent loss.
        const double used = double(store->bytes_used()) / double(1 << 20),
                     cap = double(store->options().max_bytes >> 20);
        if (!store->at_cap()) {
            ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1), "trace in memory: %.0f of %.0f MiB (measured)", used, cap);
        } else {
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(
                ImVec4(1, 0.75f, 0.3f, 1),
                "trace in memory reached its cap of %.0f MiB at step %d: %llu op spans and %llu memory "
                "events since are not kept here (the trace file has them all; --store-cap-mib raises it)",
                cap, store->cap_reached_at_step(), (unsigned long long)store->spans_dropped_by_cap(),
                (unsigned long long)store->memory_events_dropped_by_cap());
            ImGui::PopTextWrapPos();
        }
        if (const uint64_t dropped = store->rank_count() > 0 ? total_dropped_events(*store) : 0; dropped > 0)
            ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "%llu events dropped by the ranks' recorders (ring full)",
                               (unsigned long long)dropped);
    }
    if (!app.log.error.empty()) {
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
}

// A setting kept as a double (bucket size, capacity factor) on a float slider.
bool slider(const char* label, double& v, float min, float max, const char* format, ImGuiSliderFlags flags = 0) {
    float f = float(v);
    if (!ImGui::SliderFloat(label, &f, min, max, format, flags)) return false;
    v = f;
    return true;
}

// A setting kept as an enum, chosen by its flag value's name.
template <typename E, typename Name, typename Parse>
void enum_combo(const char* label, E& value, std::initializer_list<const char*> names, Name name_of, Parse parse) {
    std::string text(name_of(value));
    ImGui::SetNextItemWidth(em(110));
    if (text_combo(label, text, std::vector<std::string>(names.begin(), names.end()))) value = parse(text);
}

// A setting kept as an enum with a name table (common/core/enum_names.h).
template <typename E, size_t N>
bool table_combo(const char* label, E& value, const EnumTable<E, N>& table) {
    std::string text(enum_name(table, value));
    const auto names = enum_names(table);
    if (!text_combo(label, text, std::vector<std::string>(names.begin(), names.end()))) return false;
    value = parse_enum(table, text, label);
    return true;
}

void text_field(const char* label, const char* hint, std::string& value, float width) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s", value.c_str());
    ImGui::SetNextItemWidth(em(width));
    if (ImGui::InputTextWithHint(label, hint, buf, sizeof buf)) value = buf;
}

void draw_settings(AppState& app) {
    // The panel edits the run's TrainConfig; its arguments come from the trainer's own flag table.
    TrainConfig& c = app.settings.config;
    ParallelLayout& p = c.parallel;
    HostSettings& hosts = app.settings.hosts;
    static std::vector<std::string> presets = list_presets();
    std::string preset = c.preset;
    ImGui::SetNextItemWidth(em(150));
    if (text_combo("preset", preset, presets)) app.settings.set_preset(preset);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("switching keeps the settings you changed from the old preset's");
    if (ImGui::TreeNodeEx("model", 0)) {
        int_field("layers", c.model.layers, 1, 256, "layers");
        int_field("hidden", c.model.hidden, 1, 16384, "hidden");
        int_field("heads", c.model.heads, 1, 256, "heads");
        int_field("seq", c.model.seq, 1, 32768, "seq");
        ImGui::TreePop();
    }
    int_field("micro-batch", c.batch, 1, 4096, "batch");
    int_field("micro-batches", c.grad_accum, 1, 1024, "grad_accum");
    int_field("steps", c.steps, 1, 1000000, "steps");
    ImGui::Separator();
    int_field("dp", p.dp, 1, 64, "dp");
    ImGui::SetNextItemWidth(em(110));
    ImGui::SliderInt("ZeRO", &p.zero, 0, 3);
    setting_tip("zero");
    int_field("pp", p.pp, 1, 64, "pp");
    // What is greyed out here is not passed either (LaunchSettings::effective).
    const Applicable applies = applicable(c);
    ImGui::BeginDisabled(!applies.schedule);
    ImGui::SetNextItemWidth(em(110));
    if (table_combo("schedule", p.pp_schedule, kPipelineSchedules) && p.pp_schedule != PipelineSchedule::interleaved)
        p.pp_chunks = 1;
    setting_tip("pp_schedule");
    ImGui::BeginDisabled(!applies.chunks);
    int_field("chunks per rank", p.pp_chunks, 1, 16, "pp_chunks");
    ImGui::EndDisabled();
    ImGui::EndDisabled();
    int_field("tp", p.tp, 1, 64, "tp");
    ImGui::SameLine();
    ImGui::BeginDisabled(!applies.sp);
    ImGui::Checkbox("SP", &p.sp);
    setting_tip("sp");
    ImGui::EndDisabled();
    if (p.tp == 1) p.sp = false;
    int_field("cp", p.cp, 1, 64, "cp");
    ImGui::SameLine();
    ImGui::BeginDisabled(!applies.cp_balance);
    ImGui::SetNextItemWidth(em(110));
    table_combo("##balance", p.cp_balance, kCpBalances);
    setting_tip("cp_balance");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(em(100));
    table_combo("##cp_comm", p.cp_comm, kCpComms);
    setting_tip("cp_comm");
    ImGui::EndDisabled();
    if (ImGui::TreeNodeEx("experts (mixture of experts)",
                          c.model.moe_experts > 0 ? ImGuiTreeNodeFlags_DefaultOpen : 0)) {
        int_field("experts", c.model.moe_experts, 0, 1024, "moe_experts");
        ImGui::BeginDisabled(!applies.experts);
        int_field("top-K", c.model.moe_topk, 1, 64, "moe_topk");
        int_field("every", c.model.moe_every, 1, 64, "moe_every");
        ImGui::SetNextItemWidth(em(110));
        slider("capacity", c.moe_capacity_factor, 0.0f, 4.0f, c.moe_capacity_factor > 0 ? "%.2f" : "dropless");
        setting_tip("moe_capacity_factor");
        ImGui::SetNextItemWidth(em(110));
        slider("balance loss", c.moe_aux_loss_coef, 0.0f, 0.1f, "%.3f");
        setting_tip("moe_aux_loss_coef");
        int_field("ep", p.ep, 1, 64, "ep");
        ImGui::EndDisabled();
        ImGui::TreePop();
    }
    if (c.model.moe_experts == 0) p.ep = 1;
    if (ImGui::TreeNodeEx("hosts", hosts.hostfile.empty() && hosts.launcher == "mpirun" && hosts.nodes == 0
                                       ? 0
                                       : ImGuiTreeNodeFlags_DefaultOpen)) {
        ImGui::SetNextItemWidth(em(110));
        text_combo("launcher", hosts.launcher, {"mpirun", "srun"});
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "mpirun: this machine, or the hosts of a hostfile\nsrun: the nodes of the Slurm allocation "
                "this GUI runs in (salloc)");
        ImGui::BeginDisabled(hosts.launcher != "mpirun");
        ImGui::BeginDisabled(hosts.nodes > 0);
        text_field("hostfile", "(this machine)", hosts.hostfile, 220);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("an Open MPI hostfile: one 'HOST slots=N' per line");
        ImGui::EndDisabled();
        ImGui::BeginDisabled(!hosts.hostfile.empty());
        ImGui::SetNextItemWidth(em(110));
        if (ImGui::InputInt("emulated nodes", &hosts.nodes)) hosts.nodes = std::clamp(hosts.nodes, 0, 64);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "0: none. N: N nodes on this machine, each a network namespace joined by a shaped "
                "link\n(needs root; ranks/N ranks a node; docs/nodes.md)");
        ImGui::BeginDisabled(hosts.nodes == 0);
        ImGui::SetNextItemWidth(em(110));
        ImGui::InputDouble("inter-node Gbit/s", &hosts.inter_node_gbps, 0, 0, "%.3g");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("the links between nodes (tc tbf); 0: unshaped");
        hosts.inter_node_gbps = std::max(0.0, hosts.inter_node_gbps);
        ImGui::SetNextItemWidth(em(110));
        text_combo("placement", hosts.placement, {"block", "cyclic"});
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "block: consecutive ranks a node (tp inside a node)\ncyclic: rank r on node r mod N "
                "(tp across the link)");
        ImGui::EndDisabled();
        ImGui::EndDisabled();
        ImGui::EndDisabled();
        text_field("stream to", "", hosts.stream_listen, 220);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "the address of this machine the ranks stream back to (a port is picked; the run's token\n"
                "goes to the ranks in ULTRASCOPE_TOKEN). 127.0.0.1 for ranks on this machine; for other\n"
                "hosts this machine's address on their network, or 0.0.0.0 (its host name is sent)");
        ImGui::TreePop();
    }
    if (ImGui::TreeNodeEx("checkpoints", c.save.empty() && c.load.empty() ? 0 : ImGuiTreeNodeFlags_DefaultOpen)) {
        text_field("save to", "(none)", c.save, 220);
        setting_tip("save");
        ImGui::BeginDisabled(!applies.save_every);
        int_field("every N steps", c.save_every, 0, 1000000, "save_every");
        ImGui::EndDisabled();
        text_field("resume from", "(start fresh)", c.load, 220);
        setting_tip("load");
        ImGui::TreePop();
    }
    ImGui::SetNextItemWidth(em(110));
    slider("bucket MiB", p.bucket_mb, 0.25f, 32.0f, "%.2f", ImGuiSliderFlags_Logarithmic);
    setting_tip("bucket_mb");
    ImGui::Checkbox("overlap gradient all-reduce", &p.overlap);
    setting_tip("overlap");
    enum_combo("precision", c.precision, {"fp32", "bf16"}, precision_name, parse_precision);
    setting_tip("precision");
    enum_combo("recompute", c.recompute, {"none", "selective", "full"}, recompute_name, parse_recompute);
    setting_tip("recompute");
    enum_combo("attention", c.attention, {"naive", "flash"}, attention_name, parse_attention);
    setting_tip("attention");
    LaunchSettings& s = app.settings;

    // Validation as you type; resolved only when the settings change (it reads the preset file).
    static LaunchSettings checked;
    static std::string problem = s.problem(), prediction;
    static bool first = true;
    if (first || !(checked == s)) {
        first = false;
        checked = s;
        problem = s.problem();
        prediction.clear();
        if (problem.empty()) {
            const predict::Prediction p = predict::predict(predict::PredictInput::from_config(s.resolve().to_json()));
            prediction = fmt::format("predicted per rank: {} (peak), {:.1f} MFLOP/token",
                                     format_bytes(p.memory_total()), p.flops_per_token / 1e6);
            prediction += fmt::format(
                "\nactivations per layer {} (textbook {}); {} micro-batch(es) in flight on the "
                "first stage",
                format_bytes(p.activations_per_layer), format_bytes(p.activations_per_layer_formula),
                p.micro_batches_in_flight);
            if (s.config.parallel.tp > 1)
                prediction += fmt::format("\n{} parameters per rank; tp sends {} per step (critical path)",
                                          p.params_on_rank, format_bytes(p.comm_bytes[size_t(prof::GroupKind::tp)]));
            if (s.config.parallel.cp > 1)
                prediction += fmt::format("\ncp {} sends {} per step",
                                          s.config.parallel.cp_comm == CpComm::allgather ? "all-gather" : "ring",
                                          format_bytes(p.comm_bytes[size_t(prof::GroupKind::cp)]));
            if (p.active_params != p.params)
                prediction += fmt::format("\n{:.2f}M parameters, {:.2f}M active per token (FLOPs count these)",
                                          double(p.params) / 1e6, double(p.active_params) / 1e6);
            if (s.config.parallel.ep > 1)
                prediction += fmt::format("\n{:.2f}M of them here; ep all-to-alls send {} per step (uniform routing)",
                                          double(p.params_on_rank) / 1e6,
                                          format_bytes(p.comm_bytes[size_t(prof::GroupKind::ep)]));
        }
    }
    // Under a PyTorch run the form's prediction would read as the run's: it is the form's, for a run to launch.
    const prof::TraceStore* shown = app.store();
    const bool imported_shown = shown && shown->rank_count() > 0 && shown->is_imported();
    if (problem.empty()) {
        ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.5f, 1), "ok: %d rank(s) = dp %d x pp %d x tp %d x cp %d%s", s.ranks(),
                           p.dp, p.pp, p.tp, p.cp, p.ep > 1 ? fmt::format(" (ep {} within dp)", p.ep).c_str() : "");
        if (imported_shown)
            ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1),
                               "(the prediction of these settings shows when the run shown is the engine's)");
        else
            ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", prediction.c_str());
    } else {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "%s", problem.c_str());
        ImGui::PopTextWrapPos();
    }
    ImGui::BeginDisabled(!problem.empty());
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

}  // namespace

void draw_launch_panel(AppState& app) {
    draw_status(app);
    ImGui::Separator();
    draw_settings(app);
    ImGui::Separator();
    ImGui::TextUnformatted("Messages");
    ImGui::BeginChild("log", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
    for (const auto& line : app.log.lines) ImGui::TextUnformatted(line.c_str());
    if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4) ImGui::SetScrollHereY(1.0f);
    ImGui::EndChild();
}

}  // namespace us::gui
