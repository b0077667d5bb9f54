#include "engine/backend/cuda/cuda_check.h"

#include <fmt/format.h>

#include "common/core/check.h"

namespace us::cuda {

void cuda_call_failed(const char* call, cudaError_t error, const char* file, int line) {
    assertion_failed(call, file, line,
                     fmt::format("CUDA error {} ({})", cudaGetErrorName(error), cudaGetErrorString(error)));
}

void cublas_call_failed(const char* call, cublasStatus_t status, const char* file, int line) {
    assertion_failed(call, file, line,
                     fmt::format("cuBLAS error {} ({})", cublasGetStatusName(status), cublasGetStatusString(status)));
}

}  // namespace us::cuda
