// The offscreen surface (gui_surface.h): EGL without a window system. The EGL device platform first (a GPU's own
// device: NVIDIA's driver renders there with no X server), then Mesa's surfaceless platform (llvmpipe on a machine
// with no GPU), then the default display. The context renders into a framebuffer object; GL entry points newer
// than OpenGL 1.x come from eglGetProcAddress. ImGui's own loader (imgui_impl_opengl3) goes through libGL's
// dispatch, which follows whichever context is current, EGL's included (libglvnd).
#include "app/gui/platform/gui_surface.h"

#include <imgui.h>

#include <chrono>
#include <thread>

#ifdef US_HAVE_EGL
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/gl.h>
#include <fmt/format.h>

#include <vector>
#endif

namespace us::gui {

#ifdef US_HAVE_EGL

namespace {

// OpenGL 3 framebuffer-object entry points, as eglGetProcAddress hands them out.
constexpr GLenum kFramebuffer = 0x8D40, kRenderbuffer = 0x8D41, kColorAttachment0 = 0x8CE0;
constexpr GLenum kFramebufferComplete = 0x8CD5, kRgba8 = 0x8058;
struct FboCalls {
    void (*gen_framebuffers)(GLsizei, GLuint*) = nullptr;
    void (*bind_framebuffer)(GLenum, GLuint) = nullptr;
    void (*gen_renderbuffers)(GLsizei, GLuint*) = nullptr;
    void (*bind_renderbuffer)(GLenum, GLuint) = nullptr;
    void (*renderbuffer_storage)(GLenum, GLenum, GLsizei, GLsizei) = nullptr;
    void (*framebuffer_renderbuffer)(GLenum, GLenum, GLenum, GLuint) = nullptr;
    GLenum (*check_framebuffer_status)(GLenum) = nullptr;
    void (*delete_framebuffers)(GLsizei, const GLuint*) = nullptr;
    void (*delete_renderbuffers)(GLsizei, const GLuint*) = nullptr;

    bool load() {
        auto get = [](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(eglGetProcAddress(name));
            return fn != nullptr;
        };
        return get(gen_framebuffers, "glGenFramebuffers") && get(bind_framebuffer, "glBindFramebuffer") &&
               get(gen_renderbuffers, "glGenRenderbuffers") && get(bind_renderbuffer, "glBindRenderbuffer") &&
               get(renderbuffer_storage, "glRenderbufferStorage") &&
               get(framebuffer_renderbuffer, "glFramebufferRenderbuffer") &&
               get(check_framebuffer_status, "glCheckFramebufferStatus") &&
               get(delete_framebuffers, "glDeleteFramebuffers") && get(delete_renderbuffers, "glDeleteRenderbuffers");
    }
};

class OffscreenSurface final : public Surface {
public:
    OffscreenSurface(EGLDisplay display, EGLContext context, const FboCalls& fbo, int width, int height)
        : m_display(display), m_context(context), m_fbo_calls(fbo), m_width(width), m_height(height) {
        m_fbo_calls.gen_framebuffers(1, &m_fbo);
        m_fbo_calls.bind_framebuffer(kFramebuffer, m_fbo);
        m_fbo_calls.gen_renderbuffers(1, &m_color);
        m_fbo_calls.bind_renderbuffer(kRenderbuffer, m_color);
        m_fbo_calls.renderbuffer_storage(kRenderbuffer, kRgba8, width, height);
        m_fbo_calls.framebuffer_renderbuffer(kFramebuffer, kColorAttachment0, kRenderbuffer, m_color);
        m_complete = m_fbo_calls.check_framebuffer_status(kFramebuffer) == kFramebufferComplete;
        m_last = std::chrono::steady_clock::now();
    }
    ~OffscreenSurface() override {
        m_fbo_calls.delete_renderbuffers(1, &m_color);
        m_fbo_calls.delete_framebuffers(1, &m_fbo);
        eglMakeCurrent(m_display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(m_display, m_context);
        eglTerminate(m_display);
    }
    bool complete() const { return m_complete; }

    bool should_close() override { return false; }  // the screenshot or the run's end closes it
    void wait_events(double seconds) override { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }
    void new_frame() override {
        ImGuiIO& io = ImGui::GetIO();
        io.DisplaySize = ImVec2(float(m_width), float(m_height));
        io.DisplayFramebufferScale = ImVec2(1.0f, 1.0f);
        const auto now = std::chrono::steady_clock::now();
        io.DeltaTime = std::max(1e-4f, std::chrono::duration<float>(now - m_last).count());
        m_last = now;
    }
    void framebuffer_size(int& width, int& height) override { width = m_width, height = m_height; }
    void present() override { glFinish(); }
    float content_scale() override { return 1.0f; }
    void shutdown_imgui() override {}

private:
    EGLDisplay m_display;
    EGLContext m_context;
    FboCalls m_fbo_calls;
    int m_width, m_height;
    GLuint m_fbo = 0, m_color = 0;
    bool m_complete = false;
    std::chrono::steady_clock::time_point m_last;
};

// The displays to try, in order, with their names: each EGL device (the GPU first where there is one), Mesa's
// surfaceless platform, the default display.
std::vector<std::pair<EGLDisplay, std::string>> candidate_displays() {
    std::vector<std::pair<EGLDisplay, std::string>> out;
    auto get_platform_display =
        reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
    auto query_devices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
    auto query_device_string =
        reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(eglGetProcAddress("eglQueryDeviceStringEXT"));
    if (get_platform_display && query_devices) {
        EGLDeviceEXT devices[16];
        EGLint count = 0;
        if (query_devices(16, devices, &count))
            for (EGLint i = 0; i < count; ++i) {
                const char* ext = query_device_string ? query_device_string(devices[i], EGL_EXTENSIONS) : nullptr;
                const EGLDisplay d = get_platform_display(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
                if (d != EGL_NO_DISPLAY)
                    out.emplace_back(d, fmt::format("EGL device {} ({})", i, ext && *ext ? ext : "no extensions"));
            }
    }
    if (get_platform_display) {
        const EGLDisplay d = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
        if (d != EGL_NO_DISPLAY) out.emplace_back(d, "EGL surfaceless platform");
    }
    if (const EGLDisplay d = eglGetDisplay(EGL_DEFAULT_DISPLAY); d != EGL_NO_DISPLAY)
        out.emplace_back(d, "EGL default display");
    return out;
}

// An OpenGL 3.3 core context on `display`, current with no surface; EGL_NO_CONTEXT (and *why) otherwise.
EGLContext make_context(EGLDisplay display, std::string* why) {
    EGLint major = 0, minor = 0;
    if (!eglInitialize(display, &major, &minor)) {
        *why = fmt::format("eglInitialize failed (0x{:x})", eglGetError());
        return EGL_NO_CONTEXT;
    }
    if (!eglBindAPI(EGL_OPENGL_API)) {
        *why = "EGL offers no desktop OpenGL";
        eglTerminate(display);
        return EGL_NO_CONTEXT;
    }
    const EGLint attributes[] = {
        EGL_SURFACE_TYPE,    EGL_PBUFFER_BIT, EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8,
        EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,  EGL_NONE};
    EGLConfig config = nullptr;
    EGLint configs = 0;
    const bool chosen = eglChooseConfig(display, attributes, &config, 1, &configs) && configs > 0;
    const EGLint context_attributes[] = {
        EGL_CONTEXT_MAJOR_VERSION,           3,       EGL_CONTEXT_MINOR_VERSION, 3, EGL_CONTEXT_OPENGL_PROFILE_MASK,
        EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    // Without a matching config, EGL_KHR_no_config_context still gives a context for framebuffer objects.
    const EGLContext context =
        eglCreateContext(display, chosen ? config : EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, context_attributes);
    if (context == EGL_NO_CONTEXT) {
        *why = fmt::format("no OpenGL 3.3 core context (eglCreateContext 0x{:x})", eglGetError());
        eglTerminate(display);
        return EGL_NO_CONTEXT;
    }
    if (!eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, context)) {
        *why = fmt::format("the context cannot be made current without a surface (0x{:x})", eglGetError());
        eglDestroyContext(display, context);
        eglTerminate(display);
        return EGL_NO_CONTEXT;
    }
    return context;
}

}  // namespace

std::unique_ptr<Surface> make_offscreen_surface(int width, int height, std::string* which, std::string* why) {
    std::string reasons;
    for (const auto& [display, name] : candidate_displays()) {
        std::string reason;
        const EGLContext context = make_context(display, &reason);
        if (context == EGL_NO_CONTEXT) {
            reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", name, reason);
            continue;
        }
        FboCalls fbo;
        if (!fbo.load()) {
            reasons += fmt::format("{}{}: no framebuffer objects", reasons.empty() ? "" : "; ", name);
            eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
            eglDestroyContext(display, context);
            eglTerminate(display);
            continue;
        }
        auto surface = std::make_unique<OffscreenSurface>(display, context, fbo, width, height);
        if (!surface->complete()) {
            reasons += fmt::format("{}{}: the {}x{} framebuffer is incomplete", reasons.empty() ? "" : "; ", name,
                                   width, height);
            continue;  // the surface's destructor gives the context back
        }
        const char* renderer = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
        *which = fmt::format("{}, {}", name, renderer ? renderer : "unknown renderer");
        return surface;
    }
    *why = reasons.empty() ? "EGL found no display" : reasons;
    return nullptr;
}

#else

std::unique_ptr<Surface> make_offscreen_surface(int, int, std::string*, std::string* why) {
    *why = "this build has no EGL (libegl-dev was missing at build time)";
    return nullptr;
}

#endif

}  // namespace us::gui
