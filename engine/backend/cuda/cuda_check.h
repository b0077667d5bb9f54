// Checks for CUDA runtime and cuBLAS calls. A failing call at run time is a bug or a broken device (an illegal
// address, a launch failure): it aborts with the call, the error's name and file:line, and mpirun then stops the
// other ranks. Errors a user can act on (no device, out of memory) are reported before this point, as UserError.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace us::cuda {

[[noreturn]] void cuda_call_failed(const char* call, cudaError_t error, const char* file, int line);
[[noreturn]] void cublas_call_failed(const char* call, cublasStatus_t status, const char* file, int line);

}  // namespace us::cuda

#define US_CUDA_CHECK(call)                                                                                       \
    do {                                                                                                          \
        const cudaError_t us_cuda_error = (call);                                                                 \
        if (us_cuda_error != cudaSuccess) ::us::cuda::cuda_call_failed(#call, us_cuda_error, __FILE__, __LINE__); \
    } while (0)

#define US_CUBLAS_CHECK(call)                                                            \
    do {                                                                                 \
        const cublasStatus_t us_cublas_status = (call);                                  \
        if (us_cublas_status != CUBLAS_STATUS_SUCCESS)                                   \
            ::us::cuda::cublas_call_failed(#call, us_cublas_status, __FILE__, __LINE__); \
    } while (0)

// After a kernel launch: launch-configuration errors surface here, execution errors at the next sync.
#define US_CUDA_CHECK_LAUNCH() US_CUDA_CHECK(cudaPeekAtLastError())
