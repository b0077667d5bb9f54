// cuDNN opened at run time (dlopen of libcudnn.so.9) and its graph API's functions looked up by name, so that the
// product links no cuDNN and runs where it is absent: only --attention cudnn needs it, and says so when it is not
// there. Built where the toolkit has cuDNN's headers (ULTRASCOPE_HAVE_CUDNN_HEADERS, engine/CMakeLists.txt).
#pragma once

#include <string>

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <cudnn_graph.h>

namespace us::cuda {

// The functions of cuDNN's C graph API that the fused attention calls (cudnn_attention.cpp).
struct CudnnApi {
    void* library = nullptr;  // dlopen's handle; never closed (cuDNN's handles live until exit)
    std::string path;         // the name it was opened by
    size_t version = 0;       // cudnnGetVersion(): 90102 is 9.1.2
    decltype(&cudnnGetVersion) get_version = nullptr;
    decltype(&cudnnGetErrorString) get_error_string = nullptr;
    decltype(&cudnnGetLastErrorString) get_last_error_string = nullptr;
    decltype(&cudnnCreate) create = nullptr;
    decltype(&cudnnDestroy) destroy = nullptr;
    decltype(&cudnnSetStream) set_stream = nullptr;
    decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
    decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
    decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
    decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
    decltype(&cudnnBackendFinalize) finalize = nullptr;
    decltype(&cudnnBackendExecute) execute = nullptr;

    std::string version_text() const;  // "9.10.2"
    // cuDNN's words for a failed call: the status's name and, where cuDNN kept one, its last error message.
    std::string describe(cudnnStatus_t status) const;
};

// Opens `library` (a file name dlopen searches for along LD_LIBRARY_PATH, or a path) and looks up every function.
// UserError when it cannot: the library, dlopen's reason, and what to do (install cuDNN 9, or add the folder of
// libcudnn.so.9 to LD_LIBRARY_PATH; or run --attention flash). A cuDNN other than major version 9 is refused too.
CudnnApi load_cudnn(const std::string& library = "libcudnn.so.9");

}  // namespace us::cuda
#endif
