#include "app/gui/widgets/miss_marker.h"

#include <imgui.h>

namespace us::gui {

void miss_marker(const std::vector<prof::Miss>& misses, const std::string& what, int rank) {
    const std::vector<const prof::Miss*> mine = prof::misses_of(misses, what, rank);
    if (mine.empty()) return;
    bool unexplained = false;
    std::string tip;
    for (const prof::Miss* m : mine) {
        unexplained |= !m->explained;
        if (!tip.empty()) tip += '\n';
        tip += prof::format_miss(*m);
    }
    ImGui::SameLine();
    if (unexplained)
        ImGui::TextColored(ImVec4(1.0f, 0.3f, 0.3f, 1), "!");
    else
        ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.3f, 1), "~");
    if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
        ImGui::TextUnformatted(unexplained ? "differs by more than 10%, unexplained (a bug to report: issue 32)"
                                           : "differs by more than 10%, for a known reason");
        ImGui::TextUnformatted(tip.c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
}

}  // namespace us::gui
