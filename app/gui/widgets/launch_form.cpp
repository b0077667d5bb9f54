// The launch settings as a form (launch_form.h): each field edits the run's TrainConfig or where its ranks run, with
// its tooltip from the settings table; what does not apply is greyed out.
#include "app/gui/widgets/launch_form.h"

#include <imgui.h>

#include <algorithm>

#include "app/gui/widgets/theme.h"
#include "common/settings/settings_explained.h"
#include "common/settings/settings_schema.h"

namespace us::gui {

namespace {

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

// The preset, the model's shape, the batch and the steps.
void draw_preset_and_model(LaunchSettings& settings, LaunchPanelState& panel) {
    TrainConfig& c = settings.config;
    if (!panel.presets_read) panel.presets = list_presets(), panel.presets_read = true;
    std::string preset = c.preset;
    ImGui::SetNextItemWidth(em(150));
    if (text_combo("preset", preset, panel.presets)) settings.set_preset(preset);
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
}

// The parallel degrees: dp and ZeRO, pp and its schedule, tp and SP, cp and how it cuts the sequence.
void draw_layout(TrainConfig& c) {
    ParallelLayout& p = c.parallel;
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
}

void draw_experts(TrainConfig& c) {
    ParallelLayout& p = c.parallel;
    const Applicable applies = applicable(c);
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
}

// Where the ranks run: the launcher, a hostfile, emulated nodes and their links, the address they stream back to.
void draw_hosts(app::HostOptions& hosts) {
    if (ImGui::TreeNodeEx("hosts", hosts.hostfile.empty() && hosts.launcher == "mpirun" && hosts.nodes.count == 0
                                       ? 0
                                       : ImGuiTreeNodeFlags_DefaultOpen)) {
        ImGui::SetNextItemWidth(em(110));
        text_combo("launcher", hosts.launcher, {"mpirun", "srun"});
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "mpirun: this machine, or the hosts of a hostfile\nsrun: the nodes of the Slurm allocation "
                "this GUI runs in (salloc)");
        ImGui::BeginDisabled(hosts.launcher != "mpirun");
        ImGui::BeginDisabled(hosts.nodes.count > 0);
        text_field("hostfile", "(this machine)", hosts.hostfile, 220);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("an Open MPI hostfile: one 'HOST slots=N' per line");
        ImGui::EndDisabled();
        ImGui::BeginDisabled(!hosts.hostfile.empty());
        ImGui::SetNextItemWidth(em(110));
        if (ImGui::InputInt("emulated nodes", &hosts.nodes.count))
            hosts.nodes.count = std::clamp(hosts.nodes.count, 0, 64);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "0: none. N: N nodes on this machine, each a network namespace joined by a shaped "
                "link\n(needs root; ranks/N ranks a node; docs/nodes.md)");
        ImGui::BeginDisabled(hosts.nodes.count == 0);
        ImGui::SetNextItemWidth(em(110));
        ImGui::InputDouble("inter-node Gbit/s", &hosts.nodes.inter_node_gbps, 0, 0, "%.3g");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("the links between nodes (tc tbf); 0: unshaped");
        hosts.nodes.inter_node_gbps = std::max(0.0, hosts.nodes.inter_node_gbps);
        ImGui::SetNextItemWidth(em(110));
        text_combo("placement", hosts.nodes.placement, {"block", "cyclic"});
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
}

void draw_checkpoints(TrainConfig& c) {
    const Applicable applies = applicable(c);
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
}

// Bucket size and overlap, precision, recomputation and attention.
void draw_run_options(TrainConfig& c) {
    ParallelLayout& p = c.parallel;
    ImGui::SetNextItemWidth(em(110));
    slider("bucket MiB", p.bucket_mb, 0.25f, 32.0f, "%.2f", ImGuiSliderFlags_Logarithmic);
    setting_tip("bucket_mb");
    ImGui::Checkbox("overlap gradient all-reduce", &p.overlap);
    setting_tip("overlap");
    enum_combo("precision", c.precision, {"fp32", "bf16"}, precision_name, parse_precision);
    setting_tip("precision");
    enum_combo("recompute", c.recompute, {"none", "selective", "full"}, recompute_name, parse_recompute);
    setting_tip("recompute");
    enum_combo("attention", c.attention, {"naive", "flash", "cudnn"}, attention_name, parse_attention);
    setting_tip("attention");
}

}  // namespace

void draw_launch_form(LaunchSettings& settings, LaunchPanelState& panel) {
    // The panel edits the run's TrainConfig; its arguments come from the trainer's own flag table.
    draw_preset_and_model(settings, panel);
    ImGui::Separator();
    draw_layout(settings.config);
    draw_experts(settings.config);
    draw_hosts(settings.hosts);
    draw_checkpoints(settings.config);
    draw_run_options(settings.config);
}

}  // namespace us::gui
