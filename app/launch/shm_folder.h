// Open MPI's shared-memory segments (vader: 4 MiB a rank, in /dev/shm) are removed by the ranks' own teardown; a run
// killed outright (the GUI or `ultrascope run` SIGKILLed, ranks killed before MPI_Finalize) leaves them, and /dev/shm
// is memory. So each local launch puts them in a folder of its own (btl_vader_backing_directory), removed when the
// launch ends and, where this program was killed first, by the next launch of its pid namespace (stale_runs.h:
// remove_stale_temporary).
#pragma once

#include <string>
#include <vector>

namespace us::app {

class ShmFolder {
public:
    // then its pid namespace's inode and this process's id: the owner a later run of that namespace checks
    static constexpr const char* kPrefix = "ultrascope-shm-";

    ShmFolder() = default;
    ShmFolder(const ShmFolder&) = delete;
    ShmFolder& operator=(const ShmFolder&) = delete;
    ~ShmFolder() { remove(); }

    // Removes the folders of launches whose program no longer runs, then makes this launch's (where the user set no
    // backing directory of their own); returns a line per killed launch cleaned up after.
    std::vector<std::string> make();
    // The environment entry that points Open MPI at it ("" when none was made).
    std::string environment_entry() const;
    const std::string& path() const { return m_path; }
    void remove();

private:
    std::string m_path;
};

}  // namespace us::app
