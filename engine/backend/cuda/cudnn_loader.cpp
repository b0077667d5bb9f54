// cuDNN opened with dlopen and its functions looked up by name (cudnn_loader.h): the binary carries no link to
// libcudnn, so a machine without it runs everything but --attention cudnn.
#include "engine/backend/cuda/cudnn_loader.h"

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <dlfcn.h>
#include <fmt/format.h>

#include "common/core/check.h"

namespace us::cuda {

namespace {

constexpr const char* kWhatToDo =
    "--attention cudnn loads cuDNN 9 at run time: install it (e.g. pip's nvidia-cudnn-cu13 or the CUDA toolkit's "
    "cuDNN) and add the folder holding libcudnn.so.9 to LD_LIBRARY_PATH, or use --attention flash";

template <typename F>
void resolve(void* library, const std::string& path, const char* symbol, F& out) {
    dlerror();
    void* p = dlsym(library, symbol);
    if (!p) {
        const char* why = dlerror();
        fail_user("{} has no {} ({}): {}", path, symbol, why ? why : "not found", kWhatToDo);
    }
    out = reinterpret_cast<F>(p);
}

}  // namespace

std::string CudnnApi::version_text() const {
    return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

std::string CudnnApi::describe(cudnnStatus_t status) const {
    std::string text = get_error_string ? get_error_string(status) : fmt::format("status {}", int(status));
    if (get_last_error_string) {
        char last[1024] = {};
        get_last_error_string(last, sizeof last);
        if (last[0]) text += fmt::format(" ({})", last);
    }
    return text;
}

CudnnApi load_cudnn(const std::string& library) {
    CudnnApi api;
    api.path = library;
    api.library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!api.library) {
        const char* why = dlerror();
        fail_user("cannot load {} for cuDNN's fused attention: {}. {}", library, why ? why : "dlopen failed",
                  kWhatToDo);
    }
    resolve(api.library, library, "cudnnGetVersion", api.get_version);
    resolve(api.library, library, "cudnnGetErrorString", api.get_error_string);
    resolve(api.library, library, "cudnnGetLastErrorString", api.get_last_error_string);
    resolve(api.library, library, "cudnnCreate", api.create);
    resolve(api.library, library, "cudnnDestroy", api.destroy);
    resolve(api.library, library, "cudnnSetStream", api.set_stream);
    resolve(api.library, library, "cudnnBackendCreateDescriptor", api.create_descriptor);
    resolve(api.library, library, "cudnnBackendDestroyDescriptor", api.destroy_descriptor);
    resolve(api.library, library, "cudnnBackendSetAttribute", api.set_attribute);
    resolve(api.library, library, "cudnnBackendGetAttribute", api.get_attribute);
    resolve(api.library, library, "cudnnBackendFinalize", api.finalize);
    resolve(api.library, library, "cudnnBackendExecute", api.execute);
    api.version = api.get_version();
    US_CHECK_INPUT(api.version / 10000 == 9, "{} is cuDNN {}: --attention cudnn was written against cuDNN 9. {}",
                   library, api.version_text(), kWhatToDo);
    return api;
}

}  // namespace us::cuda
#endif
