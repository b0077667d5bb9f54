// Where the GUI draws: a GLFW window on a display, or an offscreen OpenGL context through EGL (no display at all:
// a headless GPU node, a CI machine) for the screenshot mode. The frame loop (window_loop.cpp) runs the same on
// both; only events, the platform's ImGui frame and presenting differ.
#pragma once

#include <memory>
#include <string>

namespace us::gui {

class Surface {
public:
    virtual ~Surface() = default;
    virtual bool should_close() = 0;
    virtual void wait_events(double seconds) = 0;  // returns early on input (a window) or after `seconds`
    virtual void new_frame() = 0;                  // the platform half of ImGui's frame (size, time, input)
    virtual void framebuffer_size(int& width, int& height) = 0;
    virtual void present() = 0;
    virtual float content_scale() = 0;  // 1 on an ordinary monitor, 2 on HiDPI
    virtual void shutdown_imgui() = 0;  // the platform backend's ImGui shutdown, before the context goes
};

// An OpenGL 3.3 core context on EGL without a display, rendering into a framebuffer object of width x height; the
// screenshot reads it back. Null with *why said when EGL offers no such context (or the build has no EGL).
// `which` names the EGL platform and device that served it.
std::unique_ptr<Surface> make_offscreen_surface(int width, int height, std::string* which, std::string* why);

}  // namespace us::gui
