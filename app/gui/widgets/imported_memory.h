// The memory panel of an imported PyTorch trace (imported_memory.cpp): its [memory] events' allocated and reserved
// bytes over the time window, each step's peak, and below them the categories over time (memory_categories.h). The
// memory view draws it for a rank of a PyTorch run.
#pragma once

#include "app/gui/state/app_state.h"

namespace us::gui {

void draw_imported_memory(AppState& app, const prof::RankTrace& rank);

}  // namespace us::gui
