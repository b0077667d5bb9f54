// Training curves over steps: loss, tokens/s, step time and MFU (against the ranks' measured device peaks).
#include <imgui.h>

#include "app/gui/model/training_model.h"
#include "app/gui/theme.h"
#include "app/gui/views.h"

namespace us::gui {

void draw_training_view(AppState& app) {
    const auto& pts = app.training();
    std::vector<float> x, loss, tps, ms, mfu;
    for (const auto& p : pts) {
        x.push_back(float(p.step));
        loss.push_back(float(p.loss));
        tps.push_back(float(p.tokens_per_s));
        ms.push_back(float(p.step_ms));
        mfu.push_back(float(100 * p.mfu));
    }
    const int n = int(x.size());
    const float h = std::max(40.0f, (ImGui::GetContentRegionAvail().y - 4 * ImGui::GetTextLineHeightWithSpacing()) / 4 - 6);
    draw_line_plot("loss", x.data(), loss.data(), n, IM_COL32(240, 200, 90, 255), "nats", h);
    draw_line_plot("tokens/s", x.data(), tps.data(), n, IM_COL32(90, 200, 240, 255), "tok/s", h);
    draw_line_plot("step time", x.data(), ms.data(), n, IM_COL32(200, 140, 240, 255), "ms", h);
    draw_line_plot("MFU (vs measured peak)", x.data(), mfu.data(), n, IM_COL32(120, 220, 140, 255), "%", h);
}

}  // namespace us::gui
