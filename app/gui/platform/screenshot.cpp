#include "app/gui/platform/screenshot.h"

#include <GLFW/glfw3.h>
#include <stb/stb_image_write.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace us::gui {

bool save_screenshot(const std::string& path, int width, int height, const std::map<std::string, ViewRegion>& regions,
                     const std::string& error_shown, const nlohmann::json& facts, std::string& why) {
    std::vector<unsigned char> pixels(size_t(width) * size_t(height) * 3);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    // a window's back buffer, or the offscreen surface's framebuffer object (its colour attachment 0)
    constexpr GLenum kFramebufferBinding = 0x8CA6, kColorAttachment0 = 0x8CE0;
    GLint framebuffer = 0;
    glGetIntegerv(kFramebufferBinding, &framebuffer);
    glReadBuffer(framebuffer != 0 ? kColorAttachment0 : GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
    stbi_flip_vertically_on_write(1);  // OpenGL's rows go bottom-up
    const std::string tmp = path + ".tmp.png";
    if (!stbi_write_png(tmp.c_str(), width, height, 3, pixels.data(), width * 3)) {
        why = "cannot write " + path;
        return false;
    }
    std::rename(tmp.c_str(), path.c_str());
    nlohmann::json j = {{"width", width}, {"height", height}, {"regions", nlohmann::json::object()}};
    for (const auto& [name, r] : regions) j["regions"][name] = {r.x, r.y, r.w, r.h};
    j["error"] = error_shown;  // the message the window showed (its box is region "error"), "" without one
    j["shown"] = facts;        // values the window showed, for tests to check against the run
    std::ofstream(path + ".json") << j.dump(2) << "\n";
    return true;
}

}  // namespace us::gui
