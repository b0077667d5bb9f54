// The run panel: where the data comes from, the launch settings with validation as you type, Launch / Stop /
// Relaunch and auto-relaunch, what the formulas predict for the settings, and the run's messages.
#include <fmt/format.h>
#include <imgui.h>

#include "app/gui/theme.h"
#include "app/gui/views.h"
#include "engine/core/format.h"
#include "engine/core/memory_category.h"
#include "profiler/analysis/predict.h"

namespace us::gui {

namespace {

uint64_t total_dropped_events(const prof::TraceStore& store) {
    uint64_t n = 0;
    for (int r : store.ranks()) n += store.rank(r)->dropped_events;
    return n;
}

bool combo(const char* label, std::string& value, const std::vector<std::string>& options) {
    bool changed = false;
    if (ImGui::BeginCombo(label, value.c_str())) {
        for (const auto& o : options)
            if (ImGui::Selectable(o.c_str(), o == value)) {
                value = o;
                changed = true;
            }
        ImGui::EndCombo();
    }
    return changed;
}

void int_field(const char* label, int& v, int min, int max, const char* help) {
    ImGui::SetNextItemWidth(em(110));
    if (ImGui::InputInt(label, &v)) v = std::clamp(v, min, max);
    if (help && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", help);
}

void draw_status(AppState& app) {
    const app::LiveRun* live = app.live();
    switch (app.source()) {
        case Source::launched:
            if (live && !live->finished()) {
                ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "running  %.0f s", live->seconds());
            } else if (live) {
                const bool ok = live->result_code() == 0;
                ImGui::TextColored(ok ? ImVec4(0.6f, 0.8f, 1, 1) : ImVec4(1, 0.45f, 0.4f, 1), ok ? "finished" : "failed (exit %d)",
                                   live->exit_code().value_or(-1));
            }
            if (live) ImGui::TextWrapped("trace: %s", live->trace_path().c_str());
            if (const auto checkpoint = app.last_checkpoint()) {
                ImGui::TextWrapped("last checkpoint: step %d, %s", checkpoint->step, checkpoint->path.c_str());
                if (live && live->finished() && live->result_code() != 0) {
                    if (ImGui::SmallButton("Resume from it")) app.resume_from_checkpoint();
                    const ImVec2 at = ImGui::GetItemRectMin(), size = ImGui::GetItemRectSize();
                    app.regions["resume"] = ViewRegion{at.x, at.y, size.x, size.y};
                    if (ImGui::IsItemHovered())
                        ImGui::SetTooltip("relaunch the same settings with --load %s: the run continues from step %d\n"
                                          "exactly as if it had not stopped (same --steps, same schedule)",
                                          checkpoint->path.c_str(), checkpoint->step);
                }
            }
            break;
        case Source::attached:
            ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "listening on port %d", live ? live->port() : 0);
            if (live) {
                ImGui::TextWrapped("Start ranks with ULTRASCOPE_TOKEN=%s and --connect <this host>:%d", live->token().c_str(),
                                   live->port());
                if (ImGui::SmallButton("Copy command")) {
                    ImGui::SetClipboardText(fmt::format("ULTRASCOPE_TOKEN={} mpirun -n 2 ultrascope-train --dp 2 --connect 127.0.0.1:{}",
                                                        live->token(), live->port())
                                                .c_str());
                }
            }
            break;
        case Source::file: ImGui::TextColored(ImVec4(0.6f, 0.8f, 1, 1), "viewing a trace file"); break;
        default:
            ImGui::TextUnformatted(app.loading() ? "loading the trace..." : "nothing loaded: launch a run or open a trace");
    }
    if (const prof::TraceStore* store = app.store()) {
        // The store's memory against its cap, always visible; reaching it is a warning, never a silent loss.
        const double used = double(store->bytes_used()) / double(1 << 20), cap = double(store->options().max_bytes >> 20);
        if (!store->at_cap()) {
            ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1), "trace in memory: %.0f of %.0f MiB (measured)", used, cap);
        } else {
            ImGui::PushTextWrapPos(0);
            ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1),
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
    if (!app.error.empty()) {
        ImGui::PushStyleColor(ImGuiCol_ChildBg, ImVec4(0.35f, 0.08f, 0.08f, 1));
        ImGui::BeginChild("error", ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * 4.5f), true);
        const ImVec2 at = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
        app.regions["error"] = ViewRegion{at.x, at.y, size.x, size.y};
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.8f, 0.75f, 1), "%s", app.error.c_str());
        ImGui::PopTextWrapPos();
        if (ImGui::SmallButton("dismiss")) app.error.clear();
        ImGui::EndChild();
        ImGui::PopStyleColor();
    }
}

void draw_settings(AppState& app) {
    LaunchSettings& s = app.settings;
    static std::vector<std::string> presets = list_presets();
    ImGui::SetNextItemWidth(em(150));
    combo("preset", s.preset, presets);
    if (ImGui::TreeNodeEx("model (0 = the preset's)", 0)) {
        int_field("layers", s.layers, 0, 256, nullptr);
        int_field("hidden", s.hidden, 0, 16384, nullptr);
        int_field("heads", s.heads, 0, 256, nullptr);
        int_field("seq", s.seq, 0, 32768, nullptr);
        ImGui::TreePop();
    }
    int_field("micro-batch", s.batch, 0, 4096, "sequences per micro-batch (0 = the preset's)");
    int_field("micro-batches", s.grad_accum, 1, 1024, "per optimizer step: gradient accumulation, and m of the pipeline");
    int_field("steps", s.steps, 0, 1000000, "optimizer steps (0 = the preset's)");
    ImGui::Separator();
    int_field("dp", s.dp, 1, 64, "data-parallel ranks");
    ImGui::SetNextItemWidth(em(110));
    ImGui::SliderInt("ZeRO", &s.zero, 0, 3);
    int_field("pp", s.pp, 1, 64, "pipeline stages: the layers split evenly, embedding on the first, head and loss on the last");
    ImGui::BeginDisabled(s.pp == 1);
    ImGui::SetNextItemWidth(em(110));
    if (combo("schedule", s.pp_schedule, {"afab", "1f1b", "interleaved", "zb1"}) && s.pp_schedule != "interleaved")
        s.pp_chunks = 1;
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("afab: all forwards, then all backwards (GPipe)\n1f1b: one forward, one backward; at most pp "
                          "micro-batches in flight\ninterleaved: 1F1B over several chunks per rank\nzb1: zero-bubble "
                          "ZB-H1, weight gradients fill the bubbles");
    ImGui::BeginDisabled(s.pp_schedule != "interleaved");
    int_field("chunks per rank", s.pp_chunks, 1, 16, "virtual stages per rank (interleaved); layers must divide by pp x chunks");
    ImGui::EndDisabled();
    ImGui::EndDisabled();
    int_field("tp", s.tp, 1, 64,
              "tensor-parallel ranks: each block's attention heads and MLP split over tp ranks (Megatron),\n"
              "with an all-reduce per branch in forward and in backward on the critical path; heads must divide by tp");
    ImGui::SameLine();
    ImGui::BeginDisabled(s.tp == 1);
    ImGui::Checkbox("SP", &s.sp);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("sequence parallelism: LayerNorms and residuals on seq/tp positions per rank; all-gather\n"
                          "before and reduce-scatter after the tensor-parallel layers; activations / tp");
    ImGui::EndDisabled();
    if (s.tp == 1) s.sp = false;
    int_field("cp", s.cp, 1, 64,
              "context-parallel ranks: each sequence split over cp ranks, attention as a ring passing key/value\n"
              "blocks (overlapped with the attention of the block in hand); activations / cp");
    ImGui::SameLine();
    ImGui::BeginDisabled(s.cp == 1);
    ImGui::SetNextItemWidth(em(110));
    combo("##balance", s.cp_balance, {"zigzag", "contiguous"});
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("zigzag: 2 cp chunks, rank r holds r and 2cp-1-r: equal causal work on every rank\n"
                          "contiguous: rank r holds chunk r: the last rank's queries see every key (imbalanced)");
    ImGui::EndDisabled();
    if (ImGui::TreeNodeEx("experts (mixture of experts)", s.moe_experts > 0 ? ImGuiTreeNodeFlags_DefaultOpen : 0)) {
        int_field("experts", s.moe_experts, 0, 1024,
                  "E experts per MoE block, each a 4h GeLU MLP; a router sends each token to K of them\n"
                  "(0: the preset's model, dense unless the preset has experts)");
        ImGui::BeginDisabled(s.moe_experts == 0);
        int_field("top-K", s.moe_topk, 1, 64, "experts per token; the gates are the K probabilities renormalised");
        int_field("every", s.moe_every, 1, 64, "every M-th block is an MoE block (1: all of them)");
        ImGui::SetNextItemWidth(em(110));
        ImGui::SliderFloat("capacity", &s.moe_capacity_factor, 0.0f, 4.0f, s.moe_capacity_factor > 0 ? "%.2f" : "dropless");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("capacity factor F: an expert takes at most ceil(tokens K / E x F) rows per micro-batch\n"
                              "on each rank and drops the rest (the token keeps its residual); 0: dropless");
        ImGui::SetNextItemWidth(em(110));
        ImGui::SliderFloat("balance loss", &s.moe_aux_loss_coef, 0.0f, 0.1f, "%.3f");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("weight of the Switch load-balancing loss coef x E x sum_i f_i P_i (per sequence)");
        int_field("ep", s.ep, 1, 64,
                  "expert-parallel ranks, carved out of dp: each holds E/ep experts of every MoE block and\n"
                  "exchanges token rows with the others in two all-to-alls per MoE block each way; ep divides dp");
        ImGui::EndDisabled();
        ImGui::TreePop();
    }
    if (s.moe_experts == 0) s.ep = 1;
    if (ImGui::TreeNodeEx("hosts", s.hostfile.empty() && s.launcher == "mpirun" ? 0 : ImGuiTreeNodeFlags_DefaultOpen)) {
        static char hostfile_buf[512], listen_buf[128];
        std::snprintf(hostfile_buf, sizeof hostfile_buf, "%s", s.hostfile.c_str());
        std::snprintf(listen_buf, sizeof listen_buf, "%s", s.stream_listen.c_str());
        ImGui::SetNextItemWidth(em(110));
        combo("launcher", s.launcher, {"mpirun", "srun"});
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("mpirun: this machine, or the hosts of a hostfile\nsrun: the nodes of the Slurm allocation "
                              "this GUI runs in (salloc)");
        ImGui::BeginDisabled(s.launcher != "mpirun");
        ImGui::SetNextItemWidth(em(220));
        if (ImGui::InputTextWithHint("hostfile", "(this machine)", hostfile_buf, sizeof hostfile_buf)) s.hostfile = hostfile_buf;
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("an Open MPI hostfile: one 'HOST slots=N' per line");
        ImGui::EndDisabled();
        ImGui::SetNextItemWidth(em(220));
        if (ImGui::InputText("stream to", listen_buf, sizeof listen_buf)) s.stream_listen = listen_buf;
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("the address of this machine the ranks stream back to (a port is picked; the run's token\n"
                              "goes to the ranks in ULTRASCOPE_TOKEN). 127.0.0.1 for ranks on this machine; for other\n"
                              "hosts this machine's address on their network, or 0.0.0.0 (its host name is sent)");
        ImGui::TreePop();
    }
    if (ImGui::TreeNodeEx("checkpoints", s.save_path.empty() && s.load_path.empty() ? 0 : ImGuiTreeNodeFlags_DefaultOpen)) {
        static char save_buf[512], load_buf[512];
        std::snprintf(save_buf, sizeof save_buf, "%s", s.save_path.c_str());
        std::snprintf(load_buf, sizeof load_buf, "%s", s.load_path.c_str());
        ImGui::SetNextItemWidth(em(220));
        if (ImGui::InputTextWithHint("save to", "(none)", save_buf, sizeof save_buf)) s.save_path = save_buf;
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("--save FILE: the checkpoint (safetensors), written atomically: a crash never leaves\n"
                              "a half-written one; at the end of the run and every N steps below");
        ImGui::BeginDisabled(s.save_path.empty());
        int_field("every N steps", s.save_every, 0, 1000000, "--save-every N (0: only at the end)");
        ImGui::EndDisabled();
        ImGui::SetNextItemWidth(em(220));
        if (ImGui::InputTextWithHint("resume from", "(start fresh)", load_buf, sizeof load_buf)) s.load_path = load_buf;
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("--load FILE: continue a run from its checkpoint; keep --steps the same as the\n"
                              "interrupted run's and it continues bitwise as if it had never stopped");
        ImGui::TreePop();
    }
    ImGui::SetNextItemWidth(em(110));
    ImGui::SliderFloat("bucket MiB", &s.bucket_mb, 0.25f, 32.0f, "%.2f", ImGuiSliderFlags_Logarithmic);
    ImGui::Checkbox("overlap gradient all-reduce", &s.overlap);
    ImGui::SetNextItemWidth(em(110));
    combo("precision", s.precision, {"fp32", "bf16"});
    ImGui::SetNextItemWidth(em(110));
    combo("recompute", s.recompute, {"none", "selective", "full"});
    ImGui::SetNextItemWidth(em(110));
    combo("attention", s.attention, {"naive", "flash"});
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("naive stores the (batch, heads, s, s) probabilities for backward: the 5as/h term of the\n"
                          "activation formula. flash runs attention blockwise with an online softmax, keeps one\n"
                          "log-sum-exp per row and recomputes the scores in backward: the s^2 term disappears.");

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
            const prof::Prediction p = prof::predict(prof::PredictInput::from_config(s.resolve().to_json()));
            prediction = fmt::format("predicted per rank: {} (peak), {:.1f} MFLOP/token", format_bytes(p.memory_total()),
                                     p.flops_per_token / 1e6);
            prediction += fmt::format("\nactivations per layer {} (textbook {})", format_bytes(p.activations_per_layer),
                                      format_bytes(p.activations_per_layer_formula));
            if (s.tp > 1)
                prediction += fmt::format("\n{} parameters per rank; tp sends {} per step (critical path)",
                                          p.params_on_rank, format_bytes(p.comm_bytes[size_t(prof::group_index("tp"))]));
            if (s.cp > 1)
                prediction += fmt::format("\ncp ring sends {} per step", format_bytes(p.comm_bytes[size_t(prof::group_index("cp"))]));
            if (p.active_params != p.params)
                prediction += fmt::format("\n{:.2f}M parameters, {:.2f}M active per token (FLOPs count these)",
                                          double(p.params) / 1e6, double(p.active_params) / 1e6);
            if (s.ep > 1)
                prediction += fmt::format("\n{:.2f}M of them here; ep all-to-alls send {} per step (uniform routing)",
                                          double(p.params_on_rank) / 1e6,
                                          format_bytes(p.comm_bytes[size_t(prof::group_index("ep"))]));
        }
    }
    if (problem.empty()) {
        ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.5f, 1), "ok: %d rank(s) = dp %d x pp %d x tp %d x cp %d%s", s.ranks(),
                           s.dp, s.pp, s.tp, s.cp, s.ep > 1 ? fmt::format(" (ep {} within dp)", s.ep).c_str() : "");
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", prediction.c_str());
    } else {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "%s", problem.c_str());
        ImGui::PopTextWrapPos();
    }
    ImGui::BeginDisabled(!problem.empty());
    if (ImGui::Button(app.running() ? "Relaunch" : "Launch")) app.launch();
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::BeginDisabled(!app.running());
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
    for (const auto& line : app.log) ImGui::TextUnformatted(line.c_str());
    if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4) ImGui::SetScrollHereY(1.0f);
    ImGui::EndChild();
}

}  // namespace us::gui
