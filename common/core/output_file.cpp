// A file written whole or not at all (output_file.h).
#include "common/core/output_file.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "common/core/check.h"

namespace us {

namespace fs = std::filesystem;

OutputFile::OutputFile(const std::string& path) : m_path(path), m_target(path), m_write_to(path) {
    std::error_code ec;
    if (fs::is_symlink(path, ec)) {  // the file the link names is the one replaced; the link stays
        const fs::path to = fs::read_symlink(path, ec);
        if (!ec) m_target = (to.is_absolute() ? to : fs::path(path).parent_path() / to).string();
    }
    const fs::file_status status = fs::status(m_target, ec);
    US_CHECK_INPUT(!fs::is_directory(status), "cannot write '{}': it is a folder: give a file's name", path);
    if (fs::exists(status) && !fs::is_regular_file(status)) return;  // a device or a pipe: written in place
    const fs::path parent = fs::path(m_target).parent_path();
    US_CHECK_INPUT(parent.empty() || fs::is_directory(parent, ec), "cannot write '{}': the folder '{}' does not exist",
                   path, parent.string());
    const fs::path name = fs::path(m_target).filename();
    std::string hidden = ".";  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "." + a + b
    hidden.append(name.string()).append(".partial-").append(std::to_string(::getpid()));
    m_write_to = (parent / hidden).string();
}

OutputFile::~OutputFile() {
    if (m_committed || m_write_to == m_target) return;
    std::error_code ec;
    fs::remove(m_write_to, ec);
}

void OutputFile::commit() {
    if (m_write_to == m_target) {
        m_committed = true;
        return;
    }
    std::error_code ec;
    fs::rename(m_write_to, m_target, ec);
    US_CHECK_INPUT(!ec, "cannot write '{}': {}", m_path, ec.message());
    m_committed = true;
}

}  // namespace us
