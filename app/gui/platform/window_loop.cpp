// The platform loop: a surface (a GLFW window, or an offscreen EGL context where there is no display) + OpenGL 3 +
// Dear ImGui set up, the frame loop (events, the app's update, one frame, render, present), the screenshot mode
// (render without interaction, write the PNG and what it shows, exit) and the shutdown. What is drawn is
// frame_layout.cpp's; what the loop keeps between frames is its FrameState.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "app/gui/platform/frame.h"
#include "app/gui/platform/gui.h"
#include "app/gui/platform/gui_surface.h"
#include "app/gui/platform/screenshot.h"
#include "app/gui/views/views.h"
#include "app/gui/platform/shown_facts.h"
#include "app/gui/widgets/theme.h"
#include "app/launch/process_guard.h"
#include "common/core/check.h"

namespace us::gui {

namespace {

// GLFW's last error, for the message when no window opens.
std::string glfw_error() {
    const char* what = nullptr;
    const int code = glfwGetError(&what);
    return fmt::format("{} (GLFW error {})", what ? what : "no reason given", code);
}

// Where the layout persists: ~/.config/ultrascope/imgui.ini.
std::string ini_path() {
    const char* home = std::getenv("HOME");
    if (!home) return "imgui.ini";
    const std::filesystem::path dir = std::filesystem::path(home) / ".config" / "ultrascope";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    return (dir / "imgui.ini").string();
}

// A GLFW window and its ImGui platform backend.
class GlfwSurface final : public Surface {
public:
    explicit GlfwSurface(GLFWwindow* window) : m_window(window) {}
    bool should_close() override { return glfwWindowShouldClose(m_window); }
    void wait_events(double seconds) override { glfwWaitEventsTimeout(seconds); }
    void new_frame() override { ImGui_ImplGlfw_NewFrame(); }
    void framebuffer_size(int& width, int& height) override { glfwGetFramebufferSize(m_window, &width, &height); }
    void present() override { glfwSwapBuffers(m_window); }
    float content_scale() override {
        float x = 1.0f, y = 1.0f;
        glfwGetWindowContentScale(m_window, &x, &y);
        return x;
    }
    void shutdown_imgui() override { ImGui_ImplGlfw_Shutdown(); }

private:
    GLFWwindow* m_window;
};

// Nothing is loading or being derived and a launched run has finished: the picture will not change any more.
bool settled(const AppState& app) {
    if (app.source.loading() || app.derived.busy() || app.lessons.busy() || app.planner.searching() ||
        app.snapshots.loading() || app.views.memory_categories.loading() || app.large_run.digesting() ||
        app.hang.loading() || app.attach_job.busy())
        return false;
    return !(app.source.kind() == Source::launched && app.source.live() && !app.source.live()->finished());
}

// The frames from the first event to the exit code; the window and ImGui are set up around it.
int frame_loop(Surface& surface, const GuiOptions& options) {
    ImGuiIO& io = ImGui::GetIO();
    const bool screenshot = !options.screenshot.empty();
    int code = 0;
    AppState app(options);
    FrameState frame;
    frame.stats = FrameStats::from_environment();
    int frames_ready = 0;
    bool fitted = options.fit_step <= 0;
    while (!surface.should_close()) {
        // Redraw at up to 30 frames a second while something changes; the GUI must not eat the cores the ranks
        // train on.
        surface.wait_events(1.0 / 30.0);
        if (const int sig = app::stop_signal(); sig != 0) {
            std::fprintf(stderr, "ultrascope: %s: stopping the run and closing\n", strsignal(sig));
            code = 128 + sig;
            break;
        }
        const auto frame_start = std::chrono::steady_clock::now();
        app.update();
        frame.stats.add_view_ms("update", ms_since(frame_start));
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
        surface.new_frame();
        if (screenshot) io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no hover readouts where Xvfb's pointer sits
        ImGui::NewFrame();
        draw_frame(app, frame, screenshot);
        ImGui::Render();
        frame.stats.add_frame(ms_since(frame_start), app.store());
        int fw, fh;
        surface.framebuffer_size(fw, fh);
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
                // The picture shows the error; a script reading stderr gets it too.
                if (code != 0 && !app.log.error.empty())
                    std::fprintf(stderr, "ultrascope: error: %s\n", app.log.error.c_str());
            }
            break;
        }
        surface.present();
        if (options.exit_when_done && !screenshot && app.source.kind() == Source::launched && app.source.live() &&
            app.source.live()->finished()) {
            code = app.exit_code();
            break;
        }
    }
    if (!screenshot && !options.exit_when_done && app::stop_signal() == 0) code = 0;
    app.stop();
    return code;
}

}  // namespace

bool display_available() {
    const char* x = std::getenv("DISPLAY");
    const char* w = std::getenv("WAYLAND_DISPLAY");
    return (x && *x) || (w && *w);
}

namespace {

// ImGui on the surface, the frames, and ImGui's shutdown; the surface's own set-up and teardown are the caller's.
int run_on(Surface& surface, const GuiOptions& options, bool glfw) {
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    const std::string ini = ini_path();  // ImGui keeps the pointer: it outlives the context
    io.IniFilename = options.screenshot.empty() ? ini.c_str() : nullptr;  // the layout persists, except in screenshots
    // 16 px at a content scale of 1; a HiDPI monitor or projector that reports 2 gets 32 (--font-size overrides).
    set_high_contrast(options.high_contrast);
    load_fonts(options.font_px > 0 ? options.font_px : std::clamp(16.0f * surface.content_scale(), 10.0f, 64.0f));
    if (glfw) ImGui_ImplGlfw_InitForOpenGL(glfwGetCurrentContext(), true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    app::install_stop_signals();  // SIGTERM, SIGINT, SIGHUP: stop the launched runs, then close (process_guard.h)
    const int code = frame_loop(surface, options);

    ImGui_ImplOpenGL3_Shutdown();
    surface.shutdown_imgui();
    ImGui::DestroyContext();  // saves the layout to `ini`
    return code;
}

}  // namespace

int run_gui(const GuiOptions& options) {
    if (!display_available()) {  // the screenshot mode draws offscreen (EGL): a headless node needs no X server
        US_CHECK_INPUT(!options.screenshot.empty(), "the GUI needs a display (or --screenshot, which draws offscreen)");
        std::string which, why;
        std::unique_ptr<Surface> surface = make_offscreen_surface(options.width, options.height, &which, &why);
        if (!surface) {
            std::fprintf(stderr,
                         "ultrascope: no display and no offscreen OpenGL: %s. Install an EGL driver (Debian: "
                         "libegl1 libegl-mesa0; a GPU node: the NVIDIA driver's EGL), or run under xvfb-run\n",
                         why.c_str());
            return 2;
        }
        std::fprintf(stderr, "ultrascope: no display: drawing offscreen on %s\n", which.c_str());
        return run_on(*surface, options, false);
    }
    if (!glfwInit()) {
        std::fprintf(stderr, "ultrascope: cannot open a window: %s\n", glfw_error().c_str());
        return 2;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(options.width, options.height, "Ultrascope", nullptr, nullptr);
    if (!window) {
        std::fprintf(stderr, "ultrascope: cannot create an OpenGL 3.3 window: %s\n", glfw_error().c_str());
        glfwTerminate();
        return 2;
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(1);
    GlfwSurface surface(window);
    const int code = run_on(surface, options, true);
    glfwDestroyWindow(window);
    glfwTerminate();
    return code;
}

}  // namespace us::gui
