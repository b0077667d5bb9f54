// The memory categories of an imported PyTorch run over the time window as a stacked plot (memory_categories.cpp):
// measured by the memory profiler, or else inferred (read by app.views.memory_categories, state/memory_categories.h).
#pragma once

#include "app/gui/state/app_state.h"

namespace us::gui {

void draw_memory_categories(AppState& app, const prof::RankTrace& rank);

}  // namespace us::gui
