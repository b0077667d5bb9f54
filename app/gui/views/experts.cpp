// Experts: for a mixture-of-experts run, per MoE layer a heatmap of the router's load (experts down, steps
// across; blue below an even share, white at it, red above), the layer's imbalance and drops beside it; the
// balance statistic over the steps; and with expert parallelism each rank's expert compute next to its waiting in
// the all-to-alls: an overloaded expert keeps its rank computing while the others idle.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>

#include "app/gui/model/expert_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/plot.h"

namespace us::gui {

namespace {

// 0 -> blue, 1 (even) -> near white, 2 or more -> red.
ImU32 load_color(float load) {
    const float t = std::clamp(load / 2.0f, 0.0f, 1.0f);
    auto mix = [](float a, float b, float u) { return int(a + (b - a) * u); };
    if (t < 0.5f) {
        const float u = t / 0.5f;
        return IM_COL32(mix(40, 225, u), mix(90, 225, u), mix(200, 230, u), 255);
    }
    const float u = (t - 0.5f) / 0.5f;
    return IM_COL32(mix(225, 215, u), mix(225, 55, u), mix(230, 45, u), 255);
}

void draw_heatmap(const ExpertHeatmap& h, float height) {
    ImGui::Text("layer %d: most loaded / mean %.2f (worst step %.2f), dropped %.1f%%", h.layer, h.imbalance_mean,
                h.imbalance_max, 100 * h.dropped_fraction);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float label_w = 28, width = std::max(60.0f, ImGui::GetContentRegionAvail().x - label_w);
    const int columns = int(h.steps.size());
    if (columns == 0 || h.experts == 0) return;
    const float cw = width / float(columns), ch = std::max(3.0f, height / float(h.experts));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int e = 0; e < h.experts; ++e) {
        if (ch >= ImGui::GetTextLineHeight() * 0.9f || e % std::max(1, h.experts / 4) == 0)
            dl->AddText(ImVec2(origin.x, origin.y + e * ch), IM_COL32(170, 170, 170, 255),
                        fmt::format("e{}", e).c_str());
        for (int c = 0; c < columns; ++c) {
            const ImVec2 a(origin.x + label_w + c * cw, origin.y + e * ch);
            dl->AddRectFilled(a, ImVec2(a.x + std::max(1.0f, cw - (cw > 4 ? 1 : 0)), a.y + ch - 1),
                              load_color(h.at(e, c)));
        }
    }
    ImGui::InvisibleButton(fmt::format("heat{}", h.layer).c_str(), ImVec2(label_w + width, ch * h.experts));
    if (ImGui::IsItemHovered()) {
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const int c = std::clamp(int((mouse.x - origin.x - label_w) / cw), 0, columns - 1);
        const int e = std::clamp(int((mouse.y - origin.y) / ch), 0, h.experts - 1);
        ImGui::SetTooltip("layer %d, expert %d, step %d: %.2f x an even share (measured)", h.layer, e,
                          h.steps[size_t(c)], h.at(e, c));
    }
}

void draw_rank_times(const ExpertModel& m) {
    ImGui::Spacing();
    ImGui::TextUnformatted("per rank and steady step (measured): expert compute | all-to-all, of it waiting");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "expert compute (blue): time in the experts' GEMMs (the rank's own experts).\n"
            "all-to-all (orange): time expert parallelism's exchanges were outstanding; waiting (red): the\n"
            "part before the group's last rank arrived, i.e. idle because another rank's experts had more rows.");
    double most = 1e-12;
    for (const auto& r : m.ranks) most = std::max(most, r.experts_s + r.ep_s);
    const float x0 = ImGui::GetCursorPosX(), avail = ImGui::GetContentRegionAvail().x;
    for (const auto& r : m.ranks) {
        ImGui::TextUnformatted(r.label.c_str());
        ImGui::SameLine(x0 + avail * 0.28f);
        ImGui::Text("%.1f | %.1f, %.1f ms", 1e3 * r.experts_s, 1e3 * r.ep_s, 1e3 * r.ep_wait_s);
        ImGui::SameLine(x0 + avail * 0.52f);
        const float w = avail * 0.47f;
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float hgt = ImGui::GetTextLineHeight();
        ImDrawList* dl = ImGui::GetWindowDrawList();
        const float a = float(r.experts_s / most) * w, b = float((r.ep_s - r.ep_wait_s) / most) * w,
                    c = float(r.ep_wait_s / most) * w;
        dl->AddRectFilled(p, ImVec2(p.x + a, p.y + hgt), IM_COL32(90, 150, 240, 255));
        dl->AddRectFilled(ImVec2(p.x + a, p.y), ImVec2(p.x + a + b, p.y + hgt), IM_COL32(235, 120, 70, 255));
        dl->AddRectFilled(ImVec2(p.x + a + b, p.y), ImVec2(p.x + a + b + c, p.y + hgt), IM_COL32(200, 60, 60, 255));
        ImGui::Dummy(ImVec2(w, hgt));
    }
}

}  // namespace

void draw_experts_view(AppState& app) {
    const ExpertModel m = build_expert_model(app.report());
    if (m.empty()) {
        ImGui::TextWrapped(
            "No mixture of experts in this run. Set experts in the run panel (or --moe-experts E "
            "--moe-topk K) to see how the router spreads tokens, and ep to spread the experts.");
        return;
    }
    ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "router load per step, measured (white = even share)");
    const float avail = ImGui::GetContentRegionAvail().y;
    const float per_layer =
        std::clamp((avail - 6 * ImGui::GetTextLineHeightWithSpacing() -
                    (m.ranks.empty() ? 0.0f : (m.ranks.size() + 2) * ImGui::GetTextLineHeightWithSpacing())) /
                           float(m.layers.size()) -
                       ImGui::GetTextLineHeightWithSpacing(),
                   24.0f, 160.0f);
    for (const auto& h : m.layers) draw_heatmap(h, per_layer);
    if (!m.balance.empty()) {
        std::vector<float> x;
        for (int s : m.steps) x.push_back(float(s));
        draw_line_plot("balance E*sum(f*P) (1 = even)", x.data(), m.balance.data(), int(x.size()),
                       IM_COL32(240, 200, 90, 255), "", 3 * ImGui::GetTextLineHeight());
    }
    if (!m.ranks.empty()) draw_rank_times(m);
}

}  // namespace us::gui
