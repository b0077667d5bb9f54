// The window loop: GLFW + OpenGL 3 + Dear ImGui, the menu bar, the layout of the views, keyboard shortcuts, and
// the screenshot mode (render without interaction, write the PNG and the views' regions, exit).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cfloat>
#include <map>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/gui/gui.h"
#include "app/launch/process_guard.h"
#include "app/gui/screenshot.h"
#include "app/gui/theme.h"
#include "app/gui/views.h"

namespace us::gui {

namespace {

std::string g_glfw_error;

std::string ini_path() {
    const char* home = std::getenv("HOME");
    if (!home) return "imgui.ini";
    const std::filesystem::path dir = std::filesystem::path(home) / ".config" / "ultrascope";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    return (dir / "imgui.ini").string();
}

// The default layout: the run panel on the left, the timeline across the top, memory, overlap and the curves
// below. With `force` (screenshot mode) the layout is applied every frame, so the regions are known exactly.
void place(const char* name, float x, float y, float w, float h, bool force) {
    const ImGuiCond cond = force ? ImGuiCond_Always : ImGuiCond_FirstUseEver;
    ImGui::SetNextWindowPos(ImVec2(x, y), cond);
    ImGui::SetNextWindowSize(ImVec2(w, h), cond);
}

// Time spent drawing each view since the last frame-statistics line (ULTRASCOPE_FRAME_STATS_S).
std::map<std::string, double> g_view_ms;

void record_region(AppState& app, const char* key) {
    const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
    app.regions[key] = ViewRegion{p.x, p.y, s.x, s.y};
}

void draw_open_popup(AppState& app, bool& open_requested) {
    static char path[1024] = "";
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
                if (ImGui::Selectable(files[i].string().c_str())) std::snprintf(path, sizeof path, "%s", files[i].c_str());
        }
        if (ImGui::Button("Open") || enter) {
            app.open_trace(path);
            ImGui::CloseCurrentPopup();
        }
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
        ImGui::EndPopup();
    }
}

void draw_attach_popup(AppState& app, bool& attach_requested) {
    static char listen[128] = "127.0.0.1:7777";
    if (attach_requested) {
        ImGui::OpenPopup("Attach");
        attach_requested = false;
    }
    if (ImGui::BeginPopupModal("Attach", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::TextUnformatted("Listen for ranks started elsewhere on [HOST:]PORT (127.0.0.1 keeps it local):");
        ImGui::SetNextItemWidth(em(300));
        ImGui::InputText("##listen", listen, sizeof listen);
        ImGui::TextWrapped("Then start the run with the token shown in the log, e.g.\n"
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

void handle_global_keys(AppState& app, bool& open_requested) {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.WantTextInput) return;
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O)) open_requested = true;
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_R)) app.launch();
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S)) app.stop();
}

bool g_show_lessons = false;  // the left column shows the Lessons tab

// The tab flags that bring a lesson's view forward once, when the lesson opens or launches a run.
ImGuiTabItemFlags lesson_tab(const AppState& app, const char* view) {
    const lesson::Lesson* l = app.lessons.current();
    if (!l || !app.lessons.views_pending) return 0;
    for (const auto& v : l->views)
        if (v == view) return ImGuiTabItemFlags_SetSelected;
    return 0;
}

// The region a lesson's view is drawn in (compare, experts and ops are tabs of the training window).
const char* region_of(const std::string& view) {
    if (view == "compare" || view == "experts" || view == "ops" || view == "training") return "training";
    if (view == "memory" || view == "timeline" || view == "overlap") return view.c_str();
    return nullptr;
}

// Outlines each view a lesson points at, with its notes in a box at the view's top right: where to look.
void draw_highlights(AppState& app, const lesson::Lesson& l) {
    std::map<std::string, std::vector<std::string>> notes;
    for (const auto& h : l.highlights)
        if (const char* key = region_of(h.view)) notes[key].push_back(h.note.empty() ? h.key : h.note);
    ImDrawList* dl = ImGui::GetForegroundDrawList();
    const ImU32 accent = IM_COL32(255, 200, 40, 255);
    for (const auto& [key, lines] : notes) {
        const auto it = app.regions.find(key);
        if (it == app.regions.end() || it->second.w <= 0) continue;
        const ViewRegion& r = it->second;
        dl->AddRect(ImVec2(r.x + 1, r.y + 1), ImVec2(r.x + r.w - 1, r.y + r.h - 1), accent, 4.0f, 0, 3.0f);
        std::string text;
        for (const auto& line : lines) text += (text.empty() ? "look: " : "\nlook: ") + line;
        const ImVec2 size = ImGui::CalcTextSize(text.c_str(), nullptr, false, r.w * 0.6f);
        const ImVec2 at(r.x + r.w - size.x - em(14), r.y + ImGui::GetFrameHeight() + em(4));
        dl->AddRectFilled(ImVec2(at.x - em(6), at.y - em(4)), ImVec2(at.x + size.x + em(6), at.y + size.y + em(4)),
                          IM_COL32(40, 32, 0, 235), 4.0f);
        dl->AddRect(ImVec2(at.x - em(6), at.y - em(4)), ImVec2(at.x + size.x + em(6), at.y + size.y + em(4)), accent, 4.0f);
        dl->AddText(nullptr, 0.0f, at, accent, text.c_str(), nullptr, r.w * 0.6f);
        app.regions[std::string("highlight ") + key] = ViewRegion{at.x, at.y, size.x, size.y};
    }
}

// The left column: the run panel, and the Lessons tab when lessons are open.
void draw_left_column(AppState& app, float x, float y, float w, float h, bool force_layout) {
    place("Run", x, y, w, h, force_layout);
    if (ImGui::Begin("Run", nullptr, force_layout ? ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize : 0)) {
        record_region(app, "launch");
        if (app.lessons.current()) g_show_lessons = true;
        if (!g_show_lessons) {
            draw_launch_panel(app);
        } else if (ImGui::BeginTabBar("left")) {
            if (ImGui::BeginTabItem("Lesson", nullptr, app.lessons.views_pending ? ImGuiTabItemFlags_SetSelected : 0)) {
                ImGui::BeginChild("lesson");
                const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
                app.regions["lesson"] = ViewRegion{p.x, p.y, s.x, s.y};
                draw_lessons_panel(app);
                ImGui::EndChild();
                ImGui::EndTabItem();
            }
            if (ImGui::BeginTabItem("Run")) {
                draw_launch_panel(app);
                ImGui::EndTabItem();
            }
            ImGui::EndTabBar();
        }
    }
    ImGui::End();
}

}  // namespace

void draw_frame(AppState& app, bool force_layout) {
    static bool open_requested = false, attach_requested = false, help_requested = false;
    const ImGuiIO& io = ImGui::GetIO();
    float menu_h = 0;
    if (ImGui::BeginMainMenuBar()) {
        if (ImGui::BeginMenu("File")) {
            if (ImGui::MenuItem("Open trace...", "Ctrl+O")) open_requested = true;
            if (ImGui::MenuItem("Attach (listen for a run)...")) attach_requested = true;
            if (ImGui::MenuItem("New plan...")) app.planner.open = true;
            if (ImGui::MenuItem("Lessons...")) {
                app.lessons.close();
                g_show_lessons = true;
            }
            if (ImGui::MenuItem("Detach", nullptr, false, app.source.kind() == Source::attached)) app.detach();
            ImGui::Separator();
            if (ImGui::MenuItem("Quit")) glfwSetWindowShouldClose(glfwGetCurrentContext(), 1);
            ImGui::EndMenu();
        }
        if (ImGui::BeginMenu("View")) {
            ImGui::MenuItem("Follow the live run", "L", &app.window.follow);
            if (ImGui::MenuItem("Fit the whole trace", "A")) app.fit_all();
            ImGui::Separator();
            static float size = font_px();
            ImGui::SetNextItemWidth(em(120));
            ImGui::SliderFloat("font size", &size, 10.0f, 48.0f, "%.0f px");
            if (ImGui::IsItemDeactivatedAfterEdit()) request_font_px(std::round(size));  // rebuilt after the frame
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("Larger for a projector; --font-size PX at start");
            if (bool on = high_contrast(); ImGui::Checkbox("high contrast", &on)) set_high_contrast(on);
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("For a projector: black on white, stronger lines; --high-contrast at start");
            ImGui::EndMenu();
        }
        if (ImGui::BeginMenu("Help")) {
            if (ImGui::MenuItem("Shortcuts")) help_requested = true;
            ImGui::EndMenu();
        }
        ImGui::SameLine(ImGui::GetWindowWidth() * 0.35f);
        ImGui::TextColored(ImVec4(0.75f, 0.8f, 0.9f, 1), "%s", app.source.label().c_str());
        menu_h = ImGui::GetWindowSize().y;
        ImGui::EndMainMenuBar();
    }
    handle_global_keys(app, open_requested);
    draw_open_popup(app, open_requested);
    draw_attach_popup(app, attach_requested);
    draw_help_popup(help_requested);

    const float W = io.DisplaySize.x, H = io.DisplaySize.y - menu_h, y0 = menu_h;
    const std::string& only = app.options().view;
    const ImGuiWindowFlags fixed = force_layout ? ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize : 0;
    auto window = [&](const char* title, const char* key, float x, float y, float w, float h, void (*draw)(AppState&)) {
        place(title, x, y, w, h, force_layout);
        if (ImGui::Begin(title, nullptr, fixed)) {
            record_region(app, key);
            const auto t0 = std::chrono::steady_clock::now();
            draw(app);
            g_view_ms[key] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        ImGui::End();
    };
    if (only != "all" && force_layout) {  // a single view filling the window (screenshots of one view)
        if (only == "memory") window("Memory anatomy", "memory", 0, y0, W, H, draw_memory_view);
        else if (only == "timeline") window("Timeline", "timeline", 0, y0, W, H, draw_timeline_view);
        else if (only == "overlap") window("Overlap and utilization", "overlap", 0, y0, W, H, draw_overlap_view);
        else if (only == "training") window("Training", "training", 0, y0, W, H, draw_training_view);
        else if (only == "compare") window("Compare runs", "compare", 0, y0, W, H, draw_compare_view);
        else if (only == "experts") window("Experts", "experts", 0, y0, W, H, draw_experts_view);
        else if (only == "ops") window("Ops", "ops", 0, y0, W, H, draw_ops_view);
        else if (only == "planner") window("Planner", "planner", 0, y0, W, H, draw_planner_view);
        return;
    }
    const float left = std::min(340.0f, W * 0.27f), top_h = H * 0.42f;
    const float rest_w = W - left, bottom_h = H - top_h;
    draw_left_column(app, 0, y0, left, H, force_layout);
    window("Timeline", "timeline", left, y0, rest_w, top_h, draw_timeline_view);
    window("Memory anatomy", "memory", left, y0 + top_h, rest_w * 0.42f, bottom_h, draw_memory_view);
    window("Overlap and utilization", "overlap", left + rest_w * 0.42f, y0 + top_h, rest_w * 0.26f, bottom_h,
           draw_overlap_view);
    const auto training_t0 = std::chrono::steady_clock::now();
    place("Training and runs", left + rest_w * 0.68f, y0 + top_h, rest_w * 0.32f, bottom_h, force_layout);
    if (ImGui::Begin("Training and runs", nullptr, fixed)) {
        record_region(app, "training");
        if (ImGui::BeginTabBar("curves")) {
            if (ImGui::BeginTabItem("Training", nullptr, lesson_tab(app, "training"))) {
                draw_training_view(app);
                ImGui::EndTabItem();
            }
            if (ImGui::BeginTabItem("Compare", nullptr, lesson_tab(app, "compare"))) {
                draw_compare_view(app);
                ImGui::EndTabItem();
            }
            // the experts' tab comes forward by itself when a mixture-of-experts run's routing first shows
            static bool had_routing = false;
            const bool moe = !app.report().routing.empty(), bring_forward = moe && !had_routing;
            had_routing = moe;
            if (ImGui::BeginTabItem("Experts", nullptr, bring_forward ? ImGuiTabItemFlags_SetSelected : lesson_tab(app, "experts"))) {
                draw_experts_view(app);
                ImGui::EndTabItem();
            }
            if (ImGui::BeginTabItem("Ops", nullptr, lesson_tab(app, "ops"))) {
                draw_ops_view(app);
                ImGui::EndTabItem();
            }
            ImGui::EndTabBar();
        }
    }
    ImGui::End();
    g_view_ms["training"] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - training_t0).count();
    if (app.planner.open) {  // over the views, closable; the measured views stay underneath
        place("Planner", left, y0, rest_w, H, force_layout);
        if (ImGui::Begin("Planner", &app.planner.open, fixed)) {
            record_region(app, "planner");
            draw_planner_view(app);
        }
        ImGui::End();
    }
    if (const lesson::Lesson* l = app.lessons.current()) draw_highlights(app, *l);
    app.lessons.views_pending = false;
}

namespace {

// Nothing is loading and a launched run has finished: the picture will not change any more.
bool settled(const AppState& app) {
    if (app.source.loading() || app.lessons.busy() || app.planner.searching()) return false;
    return !(app.source.kind() == Source::launched && app.source.live() && !app.source.live()->finished());
}

}  // namespace

bool display_available() {
    const char* x = std::getenv("DISPLAY");
    const char* w = std::getenv("WAYLAND_DISPLAY");
    return (x && *x) || (w && *w);
}

namespace {

// ULTRASCOPE_FRAME_STATS_S=N (the soak benchmark): every N seconds, one line on stderr with the frames built since
// (count, median, 99th percentile, max of the frame build: update, layout and draw lists, without the swap) and
// the trace store's size. Off (and free) by default.
class FrameStats {
public:
    explicit FrameStats(double every_s) : m_every_s(every_s), m_last(std::chrono::steady_clock::now()) {}
    void add(double build_ms, const prof::TraceStore* store) {
        if (m_every_s <= 0) return;
        m_ms.push_back(build_ms);
        const auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - m_last).count() < m_every_s) return;
        m_last = now;
        std::sort(m_ms.begin(), m_ms.end());
        const auto at = [&](double q) { return m_ms[std::min(m_ms.size() - 1, size_t(q * double(m_ms.size())))]; };
        std::string views;
        for (auto& [name, ms] : g_view_ms) {
            views += fmt::format(" {}={:.3f}", name, ms / double(m_ms.size()));
            ms = 0;
        }
        std::fprintf(stderr, "frame_stats frames %zu p50_ms %.3f p99_ms %.3f max_ms %.3f store_bytes %zu store_at_cap %d views_mean_ms%s\n",
                     m_ms.size(), at(0.5), at(0.99), m_ms.back(), store ? store->bytes_used() : size_t(0),
                     store && store->at_cap() ? 1 : 0, views.c_str());
        m_ms.clear();
    }

private:
    double m_every_s;
    std::chrono::steady_clock::time_point m_last;
    std::vector<double> m_ms;
};

// What the window shows that a test can check against the run (screenshot mode).
nlohmann::json shown_facts(const AppState& app) {
    nlohmann::json facts = nlohmann::json::object();
    if (const auto checkpoint = app.last_checkpoint()) {
        facts["last_checkpoint_step"] = checkpoint->step;
        facts["last_checkpoint_path"] = checkpoint->path;
    }
    facts["launch_args"] = app.settings.train_args();
    facts["font_px"] = font_px();
    facts["source"] = {{"label", app.source.label()}, {"provenance", app.provenance()},
                       {"ranks", app.store() ? app.store()->ranks().size() : size_t(0)},
                       {"step_s", app.report().throughput.step_s}, {"mfu", app.report().throughput.mfu}};
    if (app.planner.result) {
        const auto& ranked = app.planner.result->search.ranked;
        facts["planner"] = {{"model", app.planner.result->model.name}, {"layouts", ranked.size()},
                            {"best", ranked.empty() ? "" : ranked.front().layout.describe()},
                            {"best_fits", !ranked.empty() && ranked.front().fits},
                            {"best_mfu", ranked.empty() ? 0.0 : ranked.front().mfu}};
    }
    if (!app.planner.error.empty()) facts["planner_error"] = app.planner.error;
    if (const auto& l = app.planner.launched; l && app.source.live() == app.planner.launched_run) {
        const int64_t measured = measured_modelled_peak(app.report(), l->memory);
        facts["planner_launched"] = {{"layout", l->layout.describe()}, {"ranks", l->layout.world()},
                                     {"memory_predicted", l->memory.categories_total()}, {"memory_measured", measured},
                                     {"step_s_measured", app.report().throughput.step_s}};
    }
    if (const lesson::Lesson* l = app.lessons.current()) {
        nlohmann::json claims = nlohmann::json::array();
        const auto& check = app.lessons.check();
        for (size_t i = 0; i < l->claims.size(); ++i) {
            const bool ready = app.lessons.claim_ready(l->claims[i]);
            const lesson::ClaimResult* r = check && i < check->claims.size() ? &check->claims[i] : nullptr;
            claims.push_back({{"says", l->claims[i].says},
                              {"status", !ready || !r ? "waiting" : r->status == lesson::ClaimStatus::held ? "held"
                                                                  : r->status == lesson::ClaimStatus::failed ? "failed"
                                                                                                              : "invalid"}});
        }
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& [label, report] : app.lessons.reports()) runs.push_back(label);
        facts["lesson"] = {{"name", l->name}, {"runs_measured", runs}, {"claims", claims},
                           {"compared_runs", app.comparison.runs.size()}};
    }
    if (const prof::TraceStore* store = app.store()) {
        facts["store_bytes"] = store->bytes_used();
        facts["store_cap_bytes"] = store->options().max_bytes;
        facts["store_at_cap"] = store->at_cap();
    }
    return facts;
}

}  // namespace

int run_gui(const GuiOptions& options) {
    glfwSetErrorCallback([](int code, const char* what) { g_glfw_error = fmt::format("{} (GLFW error {})", what, code); });
    if (!glfwInit()) {
        std::fprintf(stderr, "ultrascope: cannot open a window: %s\n", g_glfw_error.c_str());
        return 2;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(options.width, options.height, "Ultrascope", nullptr, nullptr);
    if (!window) {
        std::fprintf(stderr, "ultrascope: cannot create an OpenGL 3.3 window: %s\n", g_glfw_error.c_str());
        glfwTerminate();
        return 2;
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(1);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    const bool screenshot = !options.screenshot.empty();
    static std::string ini;
    ini = ini_path();
    io.IniFilename = screenshot ? nullptr : ini.c_str();  // the layout persists, except in screenshot mode
    // 16 px at a content scale of 1; a HiDPI monitor or projector that reports 2 gets 32 (--font-size overrides).
    float scale_x = 1.0f, scale_y = 1.0f;
    glfwGetWindowContentScale(window, &scale_x, &scale_y);
    set_high_contrast(options.high_contrast);
    load_fonts(options.font_px > 0 ? options.font_px : std::clamp(16.0f * scale_x, 10.0f, 64.0f));
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    int code = 0;
    app::install_stop_signals();  // SIGTERM, SIGINT, SIGHUP: stop the launched runs, then close (process_guard.h)
    {
        AppState app(options);
        int frames_ready = 0;
        FrameStats frame_stats(std::getenv("ULTRASCOPE_FRAME_STATS_S") ? std::atof(std::getenv("ULTRASCOPE_FRAME_STATS_S")) : 0);
        bool fitted = options.fit_step <= 0;
        while (!glfwWindowShouldClose(window)) {
            // Redraw at up to 30 frames a second while something changes; the GUI must not eat the cores the
            // ranks train on.
            glfwWaitEventsTimeout(1.0 / 30.0);
            if (const int sig = app::stop_signal(); sig != 0) {
                std::fprintf(stderr, "ultrascope: %s: stopping the run and closing\n", strsignal(sig));
                code = 128 + sig;
                break;
            }
            const auto frame_start = std::chrono::steady_clock::now();
            app.update();
            g_view_ms["update"] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count();
            if (!fitted && settled(app)) {
                app.window.follow = false;
                app.window.fit_step(app.report(), options.fit_step);
                fitted = true;
            }
            if (const float px = take_font_request(); px > 0) {  // the View menu's font size: a new atlas
                ImGui_ImplOpenGL3_DestroyFontsTexture();
                load_fonts(px);
                ImGui_ImplOpenGL3_CreateFontsTexture();
            }
            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            if (screenshot) io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no hover readouts where Xvfb's pointer sits
            ImGui::NewFrame();
            draw_frame(app, screenshot);
            ImGui::Render();
            frame_stats.add(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count(),
                            app.store());
            int fw, fh;
            glfwGetFramebufferSize(window, &fw, &fh);
            glViewport(0, 0, fw, fh);
            glClearColor(0.06f, 0.065f, 0.075f, 1.0f);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
            frames_ready = settled(app) && fitted ? frames_ready + 1 : 0;
            if (screenshot && frames_ready >= 3) {  // fonts uploaded, derived data in, layout settled
                std::string why;
                if (!save_screenshot(options.screenshot, fw, fh, app.regions, app.log.error, shown_facts(app), why)) {
                    std::fprintf(stderr, "ultrascope: %s\n", why.c_str());
                    code = 2;
                } else {
                    std::fprintf(stderr, "ultrascope: wrote %s\n", options.screenshot.c_str());
                    code = app.exit_code();
                }
                break;
            }
            glfwSwapBuffers(window);
            if (options.exit_when_done && !screenshot && app.source.kind() == Source::launched && app.source.live() &&
                app.source.live()->finished()) {
                code = app.exit_code();
                break;
            }
        }
        if (!screenshot && !options.exit_when_done && app::stop_signal() == 0) code = 0;
        app.stop();
    }
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
    return code;
}

}  // namespace us::gui
