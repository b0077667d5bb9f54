// The pipeline schedule, predicted above measured: one row per stage, F/B/W boxes labelled with their micro-batch
// and coloured by it, the idle time between them shaded as the bubble, and each stage's bubble fraction at the
// right. Both diagrams span the same width, so a measured schedule that drifts from its theory shows at a glance.
#include <fmt/format.h>
#include <imgui.h>

#include "app/gui/widgets/theme.h"
#include "app/gui/widgets/schedule_diagram.h"

namespace us::gui {

namespace {

ImU32 box_color(const DiagramBox& b) {
    const ImU32 c =
        micro_batch_color(b.micro_batch, b.op == PipeOp::forward ? prof::Phase::forward : prof::Phase::backward);
    if (b.op != PipeOp::backward_weight) return c;
    // W: the backward colour, darker
    const auto scale = [&](int shift) { return ((c >> shift) & 0xff) * 3 / 5; };
    return IM_COL32(scale(IM_COL32_R_SHIFT), scale(IM_COL32_G_SHIFT), scale(IM_COL32_B_SHIFT), 255);
}

}  // namespace

void draw_pipeline_diagram(const PipelineDiagram& d, int chunks, float width) {
    ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", d.caption.c_str());
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float row_h = ImGui::GetTextLineHeight() + 2, gutter = 60, right = 110;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float x0 = p0.x + gutter, w = std::max(40.0f, width - gutter - right);
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const DiagramBox* hovered = nullptr;
    for (int s = 0; s < d.stages; ++s) {
        const float y = p0.y + float(s) * row_h;
        dl->AddText(ImVec2(p0.x, y), kTextDim, fmt::format("stage {}", s).c_str());
        dl->AddRectFilled(ImVec2(x0, y), ImVec2(x0 + w, y + row_h - 2), kIdleColor);  // what no box covers: bubble
        if (size_t(s) < d.bubble.size())
            dl->AddText(ImVec2(x0 + w + 8, y), kTextDim, fmt::format("bubble {:.2f}", d.bubble[size_t(s)]).c_str());
    }
    for (const DiagramBox& b : d.boxes) {
        const float y = p0.y + float(b.stage) * row_h;
        const float xa = x0 + float(b.start) * w, xb = std::max(xa + 1.0f, x0 + float(b.end) * w);
        dl->AddRectFilled(ImVec2(xa, y), ImVec2(xb, y + row_h - 2), box_color(b));
        dl->AddRect(ImVec2(xa, y), ImVec2(xb, y + row_h - 2), IM_COL32(20, 20, 25, 255));
        const std::string label = action_label(PipeAction{b.op, b.micro_batch, b.chunk}, chunks);
        if (xb - xa > ImGui::CalcTextSize(label.c_str()).x + 3) {
            dl->PushClipRect(ImVec2(xa, y), ImVec2(xb, y + row_h), true);
            dl->AddText(ImVec2(xa + 2, y), IM_COL32(15, 15, 20, 255), label.c_str());
            dl->PopClipRect();
        }
        if (mouse.x >= xa && mouse.x < xb && mouse.y >= y && mouse.y < y + row_h - 2) hovered = &b;
    }
    ImGui::Dummy(ImVec2(width, float(d.stages) * row_h + 2));
    if (hovered && ImGui::IsWindowHovered()) {
        const std::string label = action_label(PipeAction{hovered->op, hovered->micro_batch, hovered->chunk}, chunks);
        if (d.window_ns > 0)
            ImGui::SetTooltip("%s on stage %d (%s)\nstarts at %.2f ms, takes %.2f ms", label.c_str(), hovered->stage,
                              d.kind.c_str(), hovered->start * d.window_ns / 1e6,
                              (hovered->end - hovered->start) * d.window_ns / 1e6);
        else
            ImGui::SetTooltip("%s on stage %d (predicted)\nstarts at %.0f%% of the step, takes %.1f%%", label.c_str(),
                              hovered->stage, 100 * hovered->start, 100 * (hovered->end - hovered->start));
    }
}

bool draw_pipeline_schedule(AppState& app, int step) {
    const PipelineDiagram& theory = app.derived.theory_diagram();
    if (theory.stages == 0) return false;
    const int chunks = app.report().predict_input.parallel.pp_chunks;
    const float width = ImGui::GetContentRegionAvail().x;
    const ImVec2 start = ImGui::GetCursorScreenPos();
    draw_pipeline_diagram(theory, chunks, width);
    static const PipelineDiagram none;
    const PipelineDiagram& measured = app.store() ? app.derived.measured_diagram(*app.store(), step) : none;
    if (measured.stages == 0)
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "measured: waiting for a step to finish on every stage");
    else
        draw_pipeline_diagram(measured, chunks, width);
    app.regions["schedule"] = ViewRegion{start.x, start.y, width, ImGui::GetCursorScreenPos().y - start.y};
    return true;
}

}  // namespace us::gui
