// Picks a backend by name. The CUDA backend registers only in builds made with the CUDA toolkit.
#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"

#ifdef US_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace us {

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
    if (options.kind == "cpu") return std::make_unique<CpuBackend>(options.threads);
    if (options.kind == "cuda") {
#ifdef US_HAVE_CUDA
        return make_cuda_backend(options);
#else
        fail_user(
            "--device cuda: this build has no CUDA backend (no CUDA toolkit was found at configure time); "
            "use --device cpu or rebuild with the toolkit in /usr/local/cuda");
#endif
    }
    fail_user("unknown --device '{}': expected cpu or cuda", options.kind);
}

}  // namespace us
