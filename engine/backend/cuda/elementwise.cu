// Elementwise ops (residual add, convert, accumulate, scale, bias add) and the bias gradient.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void residual_kernel(T* out, const T* a, const T* b, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        st(out + i, ld(a + i) + ld(b + i));
}

template <typename D, typename S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        st(dst + i, ld(src + i));
}

template <typename A, typename X>
__global__ void accumulate_kernel(A* acc, const X* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        st(acc + i, ld(acc + i) + ld(x + i));
}

template <typename T>
__global__ void scale_kernel(T* p, int64_t n, float factor) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        st(p + i, ld(p + i) * factor);
}

template <typename O, typename B>
__global__ void add_bias_kernel(O* out, const B* bias, int64_t n, int OC) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        st(out + i, ld(out + i) + ld(bias + i % OC));
}

// Rows are cut into chunks of kBiasRows; block (chunk, column tile) sums its chunk's rows of its columns in row
// order into partials[chunk][column]; the second kernel adds the chunks in order. Coalesced over columns.
constexpr int kBiasRows = 64;

template <typename D>
__global__ void bias_partials_kernel(float* partials, const D* dout, int N, int OC) {
    // chunks on x (no 65535 limit: any number of rows), column tiles on y
    const int col = blockIdx.y * blockDim.x + threadIdx.x;
    const int chunk = blockIdx.x;
    if (col >= OC) return;
    const int r0 = chunk * kBiasRows, r1 = min(N, r0 + kBiasRows);
    float acc = 0.0f;
    for (int r = r0; r < r1; ++r) acc += ld(dout + int64_t(r) * OC + col);
    partials[int64_t(chunk) * OC + col] = acc;
}

template <typename G>
__global__ void bias_finish_kernel(G* dbias, const float* partials, int chunks, int OC) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= OC) return;
    float acc = 0.0f;
    for (int c = 0; c < chunks; ++c) acc += partials[int64_t(c) * OC + col];
    st(dbias + col, ld(dbias + col) + acc);
}

}  // namespace

void residual(void* out, const void* a, const void* b, DType t, int64_t n, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        residual_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<T*>(out), static_cast<const T*>(a),
                                                                    static_cast<const T*>(b), n);
    });
    US_CUDA_CHECK_LAUNCH();
}

void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, cudaStream_t s) {
    dispatch(dst_type, [&](auto* dtag) {
        dispatch(src_type, [&](auto* stag) {
            using D = std::remove_pointer_t<decltype(dtag)>;
            using S = std::remove_pointer_t<decltype(stag)>;
            convert_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<D*>(dst), static_cast<const S*>(src), n);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void accumulate(void* acc, DType acc_type, const void* x, DType x_type, int64_t n, cudaStream_t s) {
    dispatch(acc_type, [&](auto* atag) {
        dispatch(x_type, [&](auto* xtag) {
            using A = std::remove_pointer_t<decltype(atag)>;
            using X = std::remove_pointer_t<decltype(xtag)>;
            accumulate_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<A*>(acc), static_cast<const X*>(x), n);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void scale(void* p, DType t, int64_t n, float factor, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        scale_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<T*>(p), n, factor);
    });
    US_CUDA_CHECK_LAUNCH();
}

void add_bias(void* out, DType out_type, const void* bias, DType bias_type, int N, int OC, cudaStream_t s) {
    const int64_t n = int64_t(N) * OC;
    dispatch(out_type, [&](auto* otag) {
        dispatch(bias_type, [&](auto* btag) {
            using O = std::remove_pointer_t<decltype(otag)>;
            using B = std::remove_pointer_t<decltype(btag)>;
            add_bias_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<O*>(out), static_cast<const B*>(bias), n, OC);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

size_t bias_partials_floats(int N, int OC) { return size_t(ceil_div(N, kBiasRows)) * size_t(OC); }

void bias_backward(void* dbias, DType dbias_type, const void* dout, DType dout_type, int N, int OC, float* partials,
                   cudaStream_t s) {
    if (N == 0 || OC == 0) return;
    const int chunks = ceil_div(N, kBiasRows);
    dispatch(dout_type, [&](auto* tag) {
        using D = std::remove_pointer_t<decltype(tag)>;
        bias_partials_kernel<<<dim3(chunks, ceil_div(OC, kThreads)), kThreads, 0, s>>>(partials, static_cast<const D*>(dout), N, OC);
    });
    US_CUDA_CHECK_LAUNCH();
    dispatch(dbias_type, [&](auto* tag) {
        using G = std::remove_pointer_t<decltype(tag)>;
        bias_finish_kernel<<<ceil_div(OC, kThreads), kThreads, 0, s>>>(static_cast<G*>(dbias), partials, chunks, OC);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
