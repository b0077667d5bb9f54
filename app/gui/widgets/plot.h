// A line plot with its range, a hover readout and its provenance tag, and duration formatting: drawing pieces the
// views share (plot.cpp).
#pragma once

#include <imgui.h>

#include <string>

namespace us::gui {

// provenance: "measured", "predicted", "formula" or "derived", shown beside the title and in the readout.
void draw_line_plot(const char* title, const float* xs, const float* ys, int n, ImU32 color, const char* unit,
                    float height, const char* provenance = "measured", const char* provenance_help = nullptr);
std::string format_duration_ns(double ns);

}  // namespace us::gui
