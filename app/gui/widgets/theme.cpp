#include "app/gui/widgets/theme.h"

#include <filesystem>

namespace us::gui {

namespace {
// Stacking order = MemCategory order: persistent state at the bottom, transient on top.
constexpr ImU32 kCategory[kMemCategoryCount] = {
    IM_COL32(76, 120, 220, 255),   // params
    IM_COL32(240, 150, 50, 255),   // grads
    IM_COL32(150, 100, 210, 255),  // master_params
    IM_COL32(215, 70, 80, 255),    // optimizer_state
    IM_COL32(80, 185, 110, 255),   // activations
    IM_COL32(60, 190, 190, 255),   // temporaries
    IM_COL32(230, 210, 70, 255),   // comm_buffers
    IM_COL32(140, 140, 150, 255),  // workspace
};
ImU32 with_alpha(ImU32 c, float a) { return (c & 0x00ffffffu) | (ImU32(a * 255.0f) << 24); }
}  // namespace

ImU32 category_color(int category, float alpha) { return with_alpha(kCategory[category], alpha); }

ImU32 phase_color(prof::Phase phase, float alpha) {
    switch (phase) {
        case prof::Phase::forward:
            return with_alpha(IM_COL32(90, 150, 240, 255), alpha);
        case prof::Phase::backward:
            return with_alpha(IM_COL32(240, 160, 70, 255), alpha);
        case prof::Phase::optimizer:
            return with_alpha(IM_COL32(120, 190, 70, 255), alpha);  // apart from the all-reduce's violet
        default:
            return with_alpha(IM_COL32(150, 150, 150, 255), alpha);
    }
}

ImU32 collective_color(prof::OpClass op) {
    switch (op) {
        case prof::OpClass::all_reduce:
            return IM_COL32(190, 110, 230, 255);
        case prof::OpClass::reduce_scatter:
            return IM_COL32(230, 110, 170, 255);
        case prof::OpClass::all_gather:
            return IM_COL32(120, 200, 230, 255);
        case prof::OpClass::send:
        case prof::OpClass::recv:
            return IM_COL32(240, 200, 90, 255);
        default:
            return IM_COL32(200, 200, 200, 255);
    }
}

ImU32 tp_comm_color() { return IM_COL32(250, 110, 60, 255); }
ImU32 ep_comm_color() { return IM_COL32(60, 200, 170, 255); }

ImU32 folded_color(ImU32 c) {
    // 60% of the first folded span's colour over a grey: the lane keeps its hue (tp comm stays orange when zoomed
    // out), and the box still reads as "several spans".
    auto mix = [&](int shift) { return ImU32((((c >> shift) & 0xffu) * 6 + 125 * 4) / 10) << shift; };
    return mix(IM_COL32_R_SHIFT) | mix(IM_COL32_G_SHIFT) | mix(IM_COL32_B_SHIFT) | (0xffu << IM_COL32_A_SHIFT);
}

ImU32 op_color(const prof::Span& s) {
    using prof::OpClass;
    if (s.kind == prof::SpanKind::comm && s.group == uint8_t(prof::GroupKind::tp)) {
        // Tensor-parallel collectives in their own warm hue (they sit on the critical path), shaded by collective.
        switch (s.op) {
            case OpClass::all_gather:
                return IM_COL32(250, 170, 80, 255);
            case OpClass::reduce_scatter:
                return IM_COL32(225, 75, 70, 255);
            default:
                return tp_comm_color();
        }
    }
    if (s.kind == prof::SpanKind::comm && s.group == uint8_t(prof::GroupKind::ep))
        return ep_comm_color();  // expert parallelism's all-to-alls, also on the compute thread's path
    if (s.kind == prof::SpanKind::comm) return collective_color(s.op);
    if (s.kind == prof::SpanKind::wait) return IM_COL32(200, 70, 70, 200);
    if (s.kind == prof::SpanKind::step) return IM_COL32(110, 110, 120, 255);
    const float a = s.kind == prof::SpanKind::op ? 1.0f : 0.55f;  // containers paler than the ops inside them
    return phase_color(s.phase, a);
}

ImU32 micro_batch_color(int mb, prof::Phase phase) {
    // A hue per micro-batch (the golden ratio's sequence keeps neighbours apart); backward darker than forward. The
    // hues skip the optimizer's green and the all-reduce's violet, which share the lanes with them.
    const float spread = float((mb * 0.61803398875) - int(mb * 0.61803398875)) * 0.61f;
    const float hue = spread < 0.18f ? spread : spread < 0.43f ? spread - 0.18f + 0.45f : spread - 0.43f + 0.82f;
    float r, g, b;
    ImGui::ColorConvertHSVtoRGB(hue, phase == prof::Phase::backward ? 0.65f : 0.45f,
                                phase == prof::Phase::backward ? 0.80f : 0.95f, r, g, b);
    return IM_COL32(int(r * 255), int(g * 255), int(b * 255), 255);
}

namespace {
bool g_high_contrast = false;
}

void apply_theme() {
    ImGuiStyle& s = ImGui::GetStyle();
    s.WindowRounding = 3.0f;
    s.FrameRounding = 3.0f;
    s.GrabRounding = 3.0f;
    s.WindowPadding = ImVec2(8, 8);
    s.ItemSpacing = ImVec2(8, 5);
    s.ScrollbarSize = 12.0f;
    set_high_contrast(g_high_contrast);
}

void set_high_contrast(bool on) {
    g_high_contrast = on;
    ImGuiStyle& s = ImGui::GetStyle();
    ImGui::StyleColorsDark(&s);
    s.Colors[ImGuiCol_WindowBg] = ImVec4(0.10f, 0.105f, 0.12f, 1.0f);
    s.FrameBorderSize = 0.0f;
    if (!on) return;
    // A projector washes dark greys into the black: pure black behind pure white, framed widgets, brighter accents.
    // The views' own colours are chosen for a dark background, so the contrast is raised around them.
    s.Colors[ImGuiCol_WindowBg] = s.Colors[ImGuiCol_ChildBg] = s.Colors[ImGuiCol_PopupBg] = ImVec4(0, 0, 0, 1);
    s.Colors[ImGuiCol_Text] = ImVec4(1, 1, 1, 1);
    s.Colors[ImGuiCol_TextDisabled] = ImVec4(0.8f, 0.8f, 0.8f, 1);
    s.Colors[ImGuiCol_Border] = ImVec4(0.9f, 0.9f, 0.9f, 0.9f);
    s.Colors[ImGuiCol_FrameBg] = ImVec4(0.16f, 0.16f, 0.16f, 1);
    s.Colors[ImGuiCol_TitleBgActive] = s.Colors[ImGuiCol_TitleBg] = ImVec4(0.05f, 0.2f, 0.45f, 1);
    s.Colors[ImGuiCol_Header] = ImVec4(0.1f, 0.35f, 0.75f, 1);
    s.Colors[ImGuiCol_Tab] = ImVec4(0.1f, 0.25f, 0.5f, 1);
    s.Colors[ImGuiCol_TabActive] = ImVec4(0.15f, 0.45f, 0.9f, 1);
    s.Colors[ImGuiCol_TableBorderStrong] = s.Colors[ImGuiCol_TableBorderLight] = ImVec4(0.75f, 0.75f, 0.75f, 1);
    s.FrameBorderSize = 1.0f;
}

bool high_contrast() { return g_high_contrast; }

namespace {
ImFont* g_small = nullptr;
float g_font_px = 16.0f, g_requested_px = 0.0f;
}  // namespace

float font_px() { return g_font_px; }
void request_font_px(float px) { g_requested_px = px; }
float take_font_request() {
    const float px = g_requested_px;
    g_requested_px = 0.0f;
    return px != g_font_px ? px : 0.0f;
}

void load_fonts(float size_px) {
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    g_font_px = size_px;
    apply_theme();
    ImGui::GetStyle().ScaleAllSizes(size_px / 16.0f);
    for (const char* path : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSans.ttf",
                             "/usr/share/fonts/dejavu/DejaVuSans.ttf"})
        if (std::filesystem::exists(path) && io.Fonts->AddFontFromFileTTF(path, size_px)) {
            g_small = io.Fonts->AddFontFromFileTTF(path, size_px * 0.8f);
            return;
        }
    ImFontConfig cfg;
    cfg.SizePixels = size_px;
    io.Fonts->AddFontDefault(&cfg);
    cfg.SizePixels = size_px * 0.8f;
    g_small = io.Fonts->AddFontDefault(&cfg);
}

ImFont* small_font() { return g_small ? g_small : ImGui::GetFont(); }

void legend_item(ImU32 color, const char* label) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + h * 0.2f), ImVec2(p.x + h * 0.6f, p.y + h * 0.8f),
                                              color);
    ImGui::Dummy(ImVec2(h * 0.7f, h));
    ImGui::SameLine(0, 2);
    ImGui::TextUnformatted(label);
}

bool begin_wide_table(const char* id, int columns, int rows) {
    const ImGuiStyle& style = ImGui::GetStyle();
    const float row_h = ImGui::GetTextLineHeight() + 2 * style.CellPadding.y;
    const float height = rows > 0 ? float(rows + 1) * row_h + style.ScrollbarSize + 2 : 0.0f;
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX;
    if (!ImGui::BeginTable(id, columns, flags, ImVec2(0, height))) return false;
    ImGui::TableSetupScrollFreeze(1, 1);
    return true;
}

bool text_combo(const char* label, std::string& value, const std::vector<std::string>& options) {
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

}  // namespace us::gui
