// Small drawing helpers shared by the views: a line plot with its range, a hover readout and its provenance tag,
// and duration formatting.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app/gui/widgets/theme.h"
#include "app/gui/widgets/plot.h"

namespace us::gui {

std::string format_duration_ns(double ns) {
    if (ns >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
    if (ns >= 1e6) return fmt::format("{:.2f} ms", ns / 1e6);
    if (ns >= 1e3) return fmt::format("{:.1f} us", ns / 1e3);
    return fmt::format("{:.0f} ns", ns);
}

void draw_line_plot(const char* title, const float* xs, const float* ys, int n, ImU32 color, const char* unit,
                    float height, const char* provenance, const char* provenance_help) {
    ImGui::TextUnformatted(title);
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1), "(%s)", provenance);
    if (provenance_help && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", provenance_help);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float w = std::max(50.0f, ImGui::GetContentRegionAvail().x);
    const ImVec2 p1(p0.x + w, p0.y + height);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, p1, IM_COL32(20, 22, 28, 255));
    dl->AddRect(p0, p1, IM_COL32(70, 70, 80, 255));
    ImGui::InvisibleButton(title, ImVec2(w, height));
    if (n <= 0) {
        dl->AddText(ImVec2(p0.x + 6, p0.y + 4), kTextDim, "no data yet");
        return;
    }
    float xmin = xs[0], xmax = xs[n - 1], ymin = ys[0], ymax = ys[0];
    for (int i = 0; i < n; ++i) {
        ymin = std::min(ymin, ys[i]);
        ymax = std::max(ymax, ys[i]);
    }
    if (ymax - ymin < 1e-9f) {
        ymax += 0.5f * std::max(1e-3f, std::abs(ymax));
        ymin -= 0.5f * std::max(1e-3f, std::abs(ymin));
    }
    if (xmax <= xmin) xmax = xmin + 1;
    const float pad = 4;
    auto X = [&](float x) { return p0.x + pad + (x - xmin) / (xmax - xmin) * (w - 2 * pad); };
    const float line = ImGui::GetTextLineHeight();  // the labels' height at any font size (a projector's 28 px)
    auto Y = [&](float y) { return p1.y - pad - (y - ymin) / (ymax - ymin) * (height - 2 * pad - line); };
    for (int i = 1; i < n; ++i)
        dl->AddLine(ImVec2(X(xs[i - 1]), Y(ys[i - 1])), ImVec2(X(xs[i]), Y(ys[i])), color, 1.6f);
    if (n == 1) dl->AddCircleFilled(ImVec2(X(xs[0]), Y(ys[0])), 2.5f, color);
    // Whole numbers in full up to a billion (15340 tokens/s, not 1.534e+04), else four significant digits.
    auto number = [](float v) {
        return std::abs(v) >= 1e4f && std::abs(v) < 1e9f ? fmt::format("{:.0f}", v) : fmt::format("{:.4g}", v);
    };
    dl->AddText(ImVec2(p0.x + 4, p0.y + 2), kTextDim, fmt::format("{} {}", number(ymax), unit).c_str());
    dl->AddText(ImVec2(p0.x + 4, p1.y - line - 1), kTextDim, fmt::format("{} {}", number(ymin), unit).c_str());
    if (ImGui::IsItemHovered()) {
        const float mx = ImGui::GetIO().MousePos.x;
        int best = 0;
        for (int i = 1; i < n; ++i)
            if (std::abs(X(xs[i]) - mx) < std::abs(X(xs[best]) - mx)) best = i;
        dl->AddLine(ImVec2(X(xs[best]), p0.y), ImVec2(X(xs[best]), p1.y), kGridColor);
        ImGui::SetTooltip("step %.0f: %.5g %s (%s)", xs[best], ys[best], unit, provenance);
    }
}

}  // namespace us::gui
