// Colours and fonts: one colour per memory category, per phase and per communication op, with legends drawn from
// the same tables, and a readable font (DejaVu Sans from fonts-dejavu-core, at 16 px).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "common/core/memory_category.h"
#include "profiler/event.h"
#include "profiler/trace/trace_store.h"

namespace us::gui {

ImU32 category_color(int category, float alpha = 1.0f);
ImU32 phase_color(prof::Phase phase, float alpha = 1.0f);
ImU32 op_color(const prof::Span& s);       // ops by phase, comm by collective; tensor-parallel comm in its own hue
ImU32 collective_color(prof::OpClass op);  // the data-parallel and pipeline groups' collectives, by kind
ImU32 tp_comm_color();
ImU32 ep_comm_color();
ImU32 folded_color(ImU32 first_span_color);  // spans folded into one box: their first span's hue, greyed
ImU32 micro_batch_color(int micro_batch, prof::Phase phase);
inline constexpr ImU32 kIdleColor = IM_COL32(220, 60, 60, 70);
inline constexpr ImU32 kGridColor = IM_COL32(255, 255, 255, 30);
inline constexpr ImU32 kTextDim = IM_COL32(180, 180, 180, 255);
// Text that says a view shows the planner's prediction, not a run.
inline const ImVec4 kPredictedColor = ImVec4(0.95f, 0.75f, 0.35f, 1);
inline constexpr ImU32 kWarnColor = IM_COL32(255, 120, 90, 255);

void apply_theme();
// The projector theme (View > high contrast, --high-contrast): colours only, so it can change between widgets.
void set_high_contrast(bool on);
bool high_contrast();
// Loads the UI font and a smaller one for dense views (timeline labels); falls back to ImGui's built-in font
// when DejaVu is not installed.
// The font size in pixels (the View menu, --font-size; 16 by default, times the monitor's content scale). Sizes in
// the views are designed at 16 px: em(w) is a design width at the current size. load_fonts rebuilds the font atlas
// and scales the style; between frames only (platform/window_loop.cpp applies a request before the next frame).
void load_fonts(float size_px);
float font_px();
inline float em(float design_px) { return design_px * font_px() / 16.0f; }
void request_font_px(float px);
float take_font_request();  // 0 when none
ImFont* small_font();

// A small coloured square and a label, for legends.
void legend_item(ImU32 color, const char* label);
// A table whose columns keep their contents' width (headers and figures are never cut off): narrower than that, it
// scrolls sideways with its first column frozen. `rows` (with the header) sets its height; 0 fills the space left.
bool begin_wide_table(const char* id, int columns, int rows);
// A combo box over text options; true when the user picked one (then `value` holds it).
bool text_combo(const char* label, std::string& value, const std::vector<std::string>& options);

}  // namespace us::gui
