// Whether this process is one of several a distributed launcher started (`mpirun -n W ultrascope report RUN`,
// srun), and where the report's MPI worker program is. `ultrascope` itself links no MPI (ctest viewer_links): under
// such a launcher `report` hands over to ultrascope-report-worker, which does (report_workers.h).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace us::app {

// The size of the launch this process belongs to, as mpirun's, Hydra's or srun's environment says (1: none).
inline int launched_worker_count() {
    auto env_int = [](const char* name) {
        const char* v = std::getenv(name);
        return v && *v ? std::atoi(v) : 0;
    };
    return std::max({1, env_int("OMPI_COMM_WORLD_SIZE"), env_int("PMI_SIZE"),
                     std::getenv("SLURM_PROCID") ? env_int("SLURM_NTASKS") : 0});
}

// ULTRASCOPE_REPORT_WORKER when set, else the program beside this one, else the one built with it.
inline std::string report_worker_binary() {
    if (const char* env = std::getenv("ULTRASCOPE_REPORT_WORKER"); env && *env) return env;
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec && std::filesystem::exists(self.parent_path() / "ultrascope-report-worker"))
        return (self.parent_path() / "ultrascope-report-worker").string();
    return US_REPORT_WORKER_BINARY;
}

}  // namespace us::app
