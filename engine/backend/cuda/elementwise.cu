// Elementwise ops (residual add, convert, accumulate, scale, bias add) and the bias gradient.
#include <algorithm>

#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

// out = a + b, each in its own storage type: the residual add (out, a, b alike) and accumulate (out is a).
template <bool kPacked, typename O, typename A, typename B>
__global__ void add_kernel(O* out, const A* a, const B* b, int64_t n) {
    using S = Stride<kPacked>;
    for (int64_t i = S::first(); i < n; i += S::step()) {
        float x[kPack], y[kPack];
        load(x, a + i, kPacked), load(y, b + i, kPacked);
#pragma unroll
        for (int k = 0; k < S::kStep; ++k) x[k] += y[k];
        store(out + i, x, kPacked);
    }
}

template <bool kPacked, typename D, typename Src>
__global__ void convert_kernel(D* dst, const Src* src, int64_t n) {
    using S = Stride<kPacked>;
    for (int64_t i = S::first(); i < n; i += S::step()) {
        float x[kPack];
        load(x, src + i, kPacked);
        store(dst + i, x, kPacked);
    }
}

template <bool kPacked, typename T>
__global__ void scale_kernel(T* p, int64_t n, float factor) {
    using S = Stride<kPacked>;
    for (int64_t i = S::first(); i < n; i += S::step()) {
        float a[kPack];
        load(a, p + i, kPacked);
#pragma unroll
        for (int k = 0; k < S::kStep; ++k) a[k] *= factor;
        store(p + i, a, kPacked);
    }
}

// Columns on x (kPack per thread when packed), rows grid-strided on y: no per-element division.
template <bool kPacked, typename O, typename B>
__global__ void add_bias_kernel(O* out, const B* bias, int N, int OC) {
    constexpr int step = kPacked ? kPack : 1;
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * step;
    if (col >= OC) return;
    float b[kPack];
    load(b, bias + col, kPacked);
    for (int row = blockIdx.y; row < N; row += gridDim.y) {
        O* o = out + int64_t(row) * OC + col;
        float x[kPack];
        load(x, o, kPacked);
#pragma unroll
        for (int k = 0; k < step; ++k) x[k] += b[k];
        store(o, x, kPacked);
    }
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
        launch_packed(vectorizable(n, kPack, out, a, b), n, kThreads, [&](auto packed, unsigned blocks) {
            add_kernel<decltype(packed)::value><<<blocks, kThreads, 0, s>>>(
                static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, cudaStream_t s) {
    dispatch(dst_type, [&](auto* dtag) {
        dispatch(src_type, [&](auto* stag) {
            using D = std::remove_pointer_t<decltype(dtag)>;
            using S = std::remove_pointer_t<decltype(stag)>;
            launch_packed(vectorizable(n, kPack, dst, src), n, kThreads, [&](auto packed, unsigned blocks) {
                convert_kernel<decltype(packed)::value>
                    <<<blocks, kThreads, 0, s>>>(static_cast<D*>(dst), static_cast<const S*>(src), n);
            });
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void accumulate(void* acc, DType acc_type, const void* x, DType x_type, int64_t n, cudaStream_t s) {
    dispatch(acc_type, [&](auto* atag) {
        dispatch(x_type, [&](auto* xtag) {
            using A = std::remove_pointer_t<decltype(atag)>;
            using X = std::remove_pointer_t<decltype(xtag)>;
            launch_packed(vectorizable(n, kPack, acc, x), n, kThreads, [&](auto packed, unsigned blocks) {
                add_kernel<decltype(packed)::value><<<blocks, kThreads, 0, s>>>(
                    static_cast<A*>(acc), static_cast<const A*>(acc), static_cast<const X*>(x), n);
            });
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void scale(void* p, DType t, int64_t n, float factor, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        launch_packed(vectorizable(n, kPack, p), n, kThreads, [&](auto packed, unsigned blocks) {
            scale_kernel<decltype(packed)::value><<<blocks, kThreads, 0, s>>>(static_cast<T*>(p), n, factor);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void add_bias(void* out, DType out_type, const void* bias, DType bias_type, int N, int OC, cudaStream_t s) {
    if (N == 0 || OC == 0) return;
    dispatch(out_type, [&](auto* otag) {
        dispatch(bias_type, [&](auto* btag) {
            using O = std::remove_pointer_t<decltype(otag)>;
            using B = std::remove_pointer_t<decltype(btag)>;
            const bool packed = vectorizable(OC, kPack, out, bias);
            const int columns = packed ? OC / kPack : OC;
            const dim3 grid(ceil_div(columns, kThreads), unsigned(std::min(N, 4096)));
            if (packed)
                add_bias_kernel<true>
                    <<<grid, kThreads, 0, s>>>(static_cast<O*>(out), static_cast<const B*>(bias), N, OC);
            else
                add_bias_kernel<false>
                    <<<grid, kThreads, 0, s>>>(static_cast<O*>(out), static_cast<const B*>(bias), N, OC);
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
        bias_partials_kernel<<<dim3(chunks, ceil_div(OC, kThreads)), kThreads, 0, s>>>(
            partials, static_cast<const D*>(dout), N, OC);
    });
    US_CUDA_CHECK_LAUNCH();
    dispatch(dbias_type, [&](auto* tag) {
        using G = std::remove_pointer_t<decltype(tag)>;
        bias_finish_kernel<<<ceil_div(OC, kThreads), kThreads, 0, s>>>(static_cast<G*>(dbias), partials, chunks, OC);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
