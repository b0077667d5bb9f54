// Token embedding: a gather forward; backward a deterministic scatter-add. The tokens are sorted with a stable
// radix sort (CUB, from the CUDA toolkit) carrying their positions, then blocks per distinct token (one per column
// block) add that token's rows in ascending position, rounding after every add as the CPU backend does, so the result
// is the same bits on every run and the CPU backend's bits in fp32 and bf16.
#include <cub/device/device_radix_sort.cuh>

#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

// Rows of tokens outside [vocab_begin, vocab_begin + V) are zeros: another tensor-parallel rank holds them.
template <typename T>
__global__ void gather_kernel(T* out, const int32_t* tokens, const T* wte, int C, int vocab_begin, int V) {
    const int n = blockIdx.x;
    const int row = tokens[n] - vocab_begin;
    T* dst = out + int64_t(n) * C;
    if (row < 0 || row >= V) {
        for (int i = threadIdx.x; i < C; i += blockDim.x) st(dst + i, 0.0f);
        return;
    }
    const T* src = wte + int64_t(row) * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) dst[i] = src[i];
}

__global__ void iota_kernel(int32_t* values, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) values[i] = i;
}

// Block (i, cb) works only when position i starts a run of equal tokens in the sorted order; its threads take the
// columns of column block cb, so a frequent token's long run (a byte tokenizer's space: a sixth of the batch) is
// summed by C / blockDim.x blocks at once. Each thread loads eight rows ahead, then adds them in ascending position,
// rounding after every add: the CPU backend's order, bitwise, with eight loads in flight instead of one. Tokens
// outside the rank's vocabulary rows [vocab_begin, vocab_begin + V) are skipped.
template <typename T>
__global__ void segment_add_kernel(T* dwte, const T* dout, const int32_t* sorted_tokens, const int32_t* positions,
                                   int N, int C, int vocab_begin, int V) {
    __shared__ int run_end;
    const int i = blockIdx.x;
    const int32_t token = sorted_tokens[i];
    if (i > 0 && sorted_tokens[i - 1] == token) return;
    const int row = token - vocab_begin;
    if (row < 0 || row >= V) return;
    if (threadIdx.x < 32) {  // the run's end, 32 positions a step: the first position holding another token
        const unsigned all = 0xffffffffu;
        for (int base = i + 1;; base += 32) {
            const int j = base + int(threadIdx.x);
            const unsigned same = __ballot_sync(all, j < N && sorted_tokens[j] == token);
            if (same != all) {
                if (threadIdx.x == 0) run_end = base + __ffs(~same) - 1;
                break;
            }
        }
    }
    __syncthreads();
    const int end = run_end;
    const int c = int(blockIdx.y * blockDim.x + threadIdx.x);
    if (c >= C) return;
    T acc = dwte[int64_t(row) * C + c];
    constexpr int kAhead = 8;
    for (int j = i; j < end; j += kAhead) {
        float v[kAhead];
#pragma unroll
        for (int u = 0; u < kAhead; ++u) v[u] = j + u < end ? ld(dout + int64_t(positions[j + u]) * C + c) : 0.0f;
#pragma unroll
        for (int u = 0; u < kAhead; ++u)
            if (j + u < end) st(&acc, ld(&acc) + v[u]);
    }
    dwte[int64_t(row) * C + c] = acc;
}

struct SortLayout {
    size_t keys_out = 0, values_in = 0, values_out = 0, temp = 0, temp_bytes = 0, total = 0;
};

SortLayout sort_layout(int N) {
    SortLayout l;
    const size_t ints = ceil_div<size_t>(size_t(N) * sizeof(int32_t), 256) * 256;
    l.keys_out = 0;
    l.values_in = ints;
    l.values_out = 2 * ints;
    l.temp = 3 * ints;
    US_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, l.temp_bytes, static_cast<const int32_t*>(nullptr),
                                                  static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                  static_cast<int32_t*>(nullptr), N));
    l.total = l.temp + l.temp_bytes;
    return l;
}

}  // namespace

void embedding_forward(void* out, const int32_t* tokens, const void* wte, DType t, int N, int C, int vocab_begin, int V,
                       cudaStream_t s) {
    if (N == 0) return;
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        gather_kernel<<<N, kThreads, 0, s>>>(static_cast<T*>(out), tokens, static_cast<const T*>(wte), C, vocab_begin,
                                             V);
    });
    US_CUDA_CHECK_LAUNCH();
}

size_t embedding_backward_workspace_bytes(int N) { return sort_layout(N).total; }

void embedding_backward(void* dwte, const void* dout, const int32_t* tokens, DType t, int N, int C, int vocab_begin,
                        int V, void* workspace, size_t workspace_bytes, cudaStream_t s) {
    if (N == 0) return;
    const SortLayout l = sort_layout(N);
    if (workspace_bytes < l.total)
        cuda_call_failed("embedding_backward workspace", cudaErrorInvalidValue, __FILE__, __LINE__);
    char* base = static_cast<char*>(workspace);
    auto* keys_out = reinterpret_cast<int32_t*>(base + l.keys_out);
    auto* values_in = reinterpret_cast<int32_t*>(base + l.values_in);
    auto* values_out = reinterpret_cast<int32_t*>(base + l.values_out);
    iota_kernel<<<grid_for(N, kThreads), kThreads, 0, s>>>(values_in, N);
    US_CUDA_CHECK_LAUNCH();
    size_t temp_bytes = l.temp_bytes;
    US_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + l.temp, temp_bytes, tokens, keys_out, values_in, values_out, N,
                                                  0, int(sizeof(int32_t) * 8), s));
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        constexpr int kColumns = 128;
        const dim3 grid(unsigned(N), unsigned(ceil_div(C, kColumns)));
        segment_add_kernel<<<grid, kColumns, 0, s>>>(static_cast<T*>(dwte), static_cast<const T*>(dout), keys_out,
                                                     values_out, N, C, vocab_begin, V);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
