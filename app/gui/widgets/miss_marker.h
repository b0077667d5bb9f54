// The marker the GUI's tables draw beside a figure that misses its prediction or formula by more than 10%
// (profiler/analysis/misses.h): a red "!" when nothing explains it, an amber "~" when a known difference does; the
// figures and the reason in its tooltip. The report prints the same misses at its top.
#pragma once

#include <string>

#include "profiler/analysis/misses.h"

namespace us::gui {

// Draws the marker on the current line (after the item just drawn) for the misses of `what` on `rank`; nothing
// when there are none.
void miss_marker(const std::vector<prof::Miss>& misses, const std::string& what, int rank);

}  // namespace us::gui
