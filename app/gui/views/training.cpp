// Training curves over steps: loss, tokens/s and step time (measured: the slowest rank's step), and MFU (derived:
// tokens/s x the formula's FLOPs per token / the ranks' peaks, each peak's source in its tooltip). A PyTorch trace
// has its measured step times only.
#include <imgui.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "app/gui/model/training_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/plot.h"

namespace us::gui {

namespace {

// A PyTorch trace holds no loss, no token counts and no FLOPs: what the training loop printed is not among the
// profiler's events. Its step time is measured (ProfilerStep#N): the slowest rank's wall time of each step.
void draw_imported_training(AppState& app) {
    std::map<int, double> slowest_ms;
    for (const prof::RankReport& r : app.report().ranks)
        for (const prof::StepBreakdown& b : r.steps) slowest_ms[b.step] = std::max(slowest_ms[b.step], b.wall_s * 1e3);
    std::vector<float> x, ms;
    for (const auto& [step, v] : slowest_ms) x.push_back(float(step)), ms.push_back(float(v));
    const ImVec4 dim(0.7f, 0.7f, 0.7f, 1);
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(dim,
                       "loss, tokens/s and MFU: unknown for a PyTorch trace (the profiler records no loss, no "
                       "token counts and no FLOPs; the engine's runs have them)");
    ImGui::PopTextWrapPos();
    const float h = std::max(60.0f, ImGui::GetContentRegionAvail().y - 2 * ImGui::GetTextLineHeightWithSpacing());
    draw_line_plot("step time", x.data(), ms.data(), int(x.size()), IM_COL32(200, 140, 240, 255), "ms", h, "measured",
                   "the slowest rank's wall time of each ProfilerStep");
}

}  // namespace

void draw_training_view(AppState& app) {
    if (const prof::TraceStore* store = app.store(); store && store->rank_count() > 0 && store->is_imported())
        return draw_imported_training(app);
    const auto& pts = app.derived.training();
    std::vector<float> x, loss, tps, ms, mfu;
    for (const auto& p : pts) {
        x.push_back(float(p.step));
        loss.push_back(float(p.loss));
        tps.push_back(float(p.tokens_per_s));
        ms.push_back(float(p.step_ms));
        mfu.push_back(float(100 * p.mfu));
    }
    const int n = int(x.size());
    const float h =
        std::max(40.0f, (ImGui::GetContentRegionAvail().y - 4 * ImGui::GetTextLineHeightWithSpacing()) / 4 - 6);
    if (app.showing_prediction())
        ImGui::TextColored(kPredictedColor, "loss: not predicted (the planner models time and memory, not learning)");
    else
        draw_line_plot("loss", x.data(), loss.data(), n, IM_COL32(240, 200, 90, 255), "nats", h);
    draw_line_plot("tokens/s", x.data(), tps.data(), n, IM_COL32(90, 200, 240, 255), "tok/s", h, app.provenance(),
                   "the step's global tokens over the slowest rank's step time");
    draw_line_plot("step time", x.data(), ms.data(), n, IM_COL32(200, 140, 240, 255), "ms", h, app.provenance(),
                   "the slowest rank's wall time of the step");
    std::string source = std::string("MFU = ") + app.provenance() +
                         " tokens/s x formula FLOPs per token (6N + 12 L h s) / peak.\nPeak: ";
    std::string peak;
    if (const prof::TraceStore* store = app.store(); store && store->rank_count() > 0)
        peak = store->rank(store->ranks().front())->info.device_peak_source;
    source += peak.empty() ? "unknown" : peak;
    draw_line_plot("MFU", x.data(), mfu.data(), n, IM_COL32(120, 220, 140, 255), "%", h, "derived", source.c_str());
}

}  // namespace us::gui
