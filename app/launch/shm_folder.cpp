// A launch's folder for Open MPI's shared-memory segments (shm_folder.h).
#include "app/launch/shm_folder.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "app/launch/stale_runs.h"

namespace us::app {

namespace fs = std::filesystem;

namespace {

constexpr const char* kBackingVariable = "OMPI_MCA_btl_vader_backing_directory";

}  // namespace

std::vector<std::string> ShmFolder::make() {
    remove();
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path(ec);
    // /dev/shm is often shared between containers with pid namespaces of their own (--ipc=host): the folder names
    // this process's pid namespace, and only folders of this namespace are judged by their pid.
    struct stat ns {};
    const std::string prefix = fmt::format("{}{}-", kPrefix, ::stat("/proc/self/ns/pid", &ns) == 0 ? ns.st_ino : 0);
    std::vector<std::string> notes = remove_stale_temporary(base, prefix);
    if (std::getenv(kBackingVariable)) return notes;  // the user's own choice stands
    static std::atomic<int> launches{0};
    const fs::path folder = base / fmt::format("{}{}-{}", prefix, ::getpid(), launches++);
    fs::remove_all(folder, ec);
    if (fs::create_directory(folder, ec)) m_path = folder.string();  // else Open MPI's default, as before
    return notes;
}

std::string ShmFolder::environment_entry() const {
    return m_path.empty() ? std::string() : std::string(kBackingVariable) + "=" + m_path;
}

void ShmFolder::remove() {
    if (m_path.empty()) return;
    std::error_code ec;
    fs::remove_all(m_path, ec);
    m_path.clear();
}

}  // namespace us::app
