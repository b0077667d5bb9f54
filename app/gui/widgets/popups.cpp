// The File and Help menus' popups, and the global shortcuts (popups.h).
#include "app/gui/widgets/popups.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "app/gui/widgets/theme.h"

namespace us::gui {

namespace {

void draw_open_popup(AppState& app, bool& open_requested, char (&path)[1024]) {
    if (open_requested) {
        ImGui::OpenPopup("Open trace");
        open_requested = false;
    }
    if (ImGui::BeginPopupModal("Open trace", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::TextUnformatted("Trace: a .ustrace file, or PyTorch profiler .json(.gz) files or their folder:");
        ImGui::SetNextItemWidth(em(520));
        const bool enter = ImGui::InputText("##path", path, sizeof path, ImGuiInputTextFlags_EnterReturnsTrue);
        std::error_code ec;
        if (std::filesystem::is_directory("runs", ec)) {
            ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "Recent runs:");
            std::vector<std::filesystem::path> files;
            for (const auto& e : std::filesystem::directory_iterator("runs", ec))
                if (e.path().extension() == ".ustrace") files.push_back(e.path());
            std::sort(files.rbegin(), files.rend());
            for (size_t i = 0; i < std::min<size_t>(files.size(), 10); ++i)
                if (ImGui::Selectable(files[i].string().c_str()))
                    std::snprintf(path, sizeof path, "%s", files[i].c_str());
        }
        if (ImGui::Button("Open") || enter) {
            app.open_trace({path});
            ImGui::CloseCurrentPopup();
        }
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
        ImGui::EndPopup();
    }
}

void draw_attach_popup(AppState& app, bool& attach_requested, char (&listen)[128]) {
    if (attach_requested) {
        ImGui::OpenPopup("Attach");
        attach_requested = false;
    }
    if (ImGui::BeginPopupModal("Attach", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::TextUnformatted("Listen for ranks started elsewhere on [HOST:]PORT (127.0.0.1 keeps it local):");
        ImGui::SetNextItemWidth(em(300));
        ImGui::InputText("##listen", listen, sizeof listen);
        ImGui::TextWrapped(
            "Then start the run with the token shown in the log, e.g.\n"
            "  ULTRASCOPE_TOKEN=<token> mpirun -n 2 ultrascope-train --dp 2 --connect HOST:PORT\n"
            "(under Slurm: srun ... ultrascope-train ... --connect HOST:PORT with the token exported).");
        if (ImGui::Button("Listen")) {
            app.attach(listen);
            ImGui::CloseCurrentPopup();
        }
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
        ImGui::EndPopup();
    }
}

void draw_help_popup(bool& help_requested) {
    if (help_requested) {
        ImGui::OpenPopup("Shortcuts");
        help_requested = false;
    }
    if (ImGui::BeginPopupModal("Shortcuts", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::TextUnformatted(
            "Timeline and memory (mouse over them):\n"
            "  wheel            zoom around the cursor\n"
            "  drag             pan\n"
            "  F                fit the step under the cursor\n"
            "  A                fit the whole trace\n"
            "  + / -            zoom in / out\n"
            "  left / right     pan\n"
            "  L                follow the live run\n"
            "Anywhere:\n"
            "  Ctrl+O           open a trace\n"
            "  Ctrl+R           relaunch with the current settings\n"
            "  Ctrl+S           stop the run");
        if (ImGui::Button("Close")) ImGui::CloseCurrentPopup();
        ImGui::EndPopup();
    }
}

}  // namespace

void handle_global_keys(AppState& app, Popups& popups) {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.WantTextInput) return;
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O)) popups.open_requested = true;
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_R)) app.launch();
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S)) app.stop();
}

void draw_popups(AppState& app, Popups& popups) {
    draw_open_popup(app, popups.open_requested, popups.open_path);
    draw_attach_popup(app, popups.attach_requested, popups.attach_listen);
    draw_help_popup(popups.help_requested);
}

}  // namespace us::gui
