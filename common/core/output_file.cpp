// A file written whole or not at all (output_file.h).
#include "common/core/output_file.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "common/core/check.h"

namespace us {

namespace fs = std::filesystem;

namespace {

// /dev/stdout, /dev/null, /proc/self/fd/N: streams of the system, never a file to replace (/dev/stdout names
// /proc/self/fd/1, which may be a file, a pipe or a terminal, and a rename there crosses file systems).
bool system_stream(const std::string& path) { return path.starts_with("/dev/") || path.starts_with("/proc/"); }

}  // namespace

OutputFile::OutputFile(const std::string& path) : m_path(path), m_target(path), m_write_to(path) {
    std::error_code ec;
    if (system_stream(path)) return;  // written in place
    if (fs::is_symlink(path, ec)) {   // the file the links name, at the end of the chain, is replaced; links stay
        const fs::path resolved = fs::weakly_canonical(path, ec);
        if (!ec) m_target = resolved.string();
    }
    const fs::file_status status = fs::status(m_target, ec);
    US_CHECK_INPUT(!fs::is_directory(status), "cannot write '{}': it is a folder: give a file's name", path);
    if (system_stream(m_target) || (fs::exists(status) && !fs::is_regular_file(status))) {
        m_target = m_write_to = path;  // a device or a pipe (or a link to one): written in place, through the name
        return;
    }
    const fs::path parent = fs::path(m_target).parent_path();
    US_CHECK_INPUT(parent.empty() || fs::is_directory(parent, ec), "cannot write '{}': the folder '{}' does not exist",
                   path, parent.string());
    std::string hidden = ".";  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "." + a + b
    hidden.append(fs::path(m_target).filename().string()).append(".partial-").append(std::to_string(::getpid()));
    m_write_to = (parent / hidden).string();
}

OutputFile::~OutputFile() {
    if (m_committed || in_place()) return;
    std::error_code ec;
    fs::remove(m_write_to, ec);
}

void OutputFile::commit() {
    m_committed = true;
    if (in_place()) return;
    std::error_code ec;
    fs::rename(m_write_to, m_target, ec);
    if (ec) fs::remove(m_write_to, ec);
    US_CHECK_INPUT(!ec, "cannot write '{}': {}", m_path, ec.message());
}

}  // namespace us
