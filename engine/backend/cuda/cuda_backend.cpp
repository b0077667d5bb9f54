#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/device_peak.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/attention_tiles.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cudnn_attention.h"
#include "engine/backend/cuda/cudnn_sdpa_layout.h"
#include "engine/backend/cuda/kernels.h"

namespace us {

namespace {

cudaDataType cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// Device memory for the TrackedAllocator. cudaMalloc returns null on out-of-memory so that the allocator can
// report it with its per-category picture and advice; any other failure is a broken device.
class DeviceMemory final : public RawMemory {
public:
    explicit DeviceMemory(std::string name) : m_name(std::move(name)) {}
    void* allocate(size_t bytes) override {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();  // clear the sticky-free error so later calls do not report it
            return nullptr;
        }
        US_CUDA_CHECK(e);
        return p;
    }
    void release(void* ptr, size_t) override { US_CUDA_CHECK(cudaFree(ptr)); }
    std::string_view device_name() const override { return m_name; }

private:
    std::string m_name;
};

// The node-local rank from the launcher (Open MPI, Slurm, MPICH/Hydra), or 0.
int local_rank() {
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"})
        if (const char* v = std::getenv(var)) return std::atoi(v);
    return 0;
}

}  // namespace

bool cuda_device_available(std::string* why) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) *why = fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
        return false;
    }
    if (count == 0) {
        if (why) *why = "no CUDA device is visible";
        return false;
    }
    return true;
}

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
    std::string why;
    US_CHECK_INPUT(cuda_device_available(&why),
                   "--device cuda: no usable GPU: {}. Check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu",
                   why);
    int count = 0;
    US_CUDA_CHECK(cudaGetDeviceCount(&count));
    const int device = options.device >= 0 ? options.device : local_rank() % count;
    US_CHECK_INPUT(device < count, "--device cuda: device {} requested but only {} visible", device, count);
    auto backend = std::make_unique<CudaBackend>(device);
    if (options.cudnn_attention) backend->use_cudnn_attention();
    return backend;
}

CudaBackend::CudaBackend(int device) : m_device(device) {
    US_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    US_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    m_device_name = prop.name;
    m_sm_count = prop.multiProcessorCount;
    m_cc_major = prop.major;
    m_cc_minor = prop.minor;
    US_CHECK_INPUT(m_cc_major >= 8,
                   "--device cuda: {} has compute capability {}.{}; this build needs 8.0 or newer (bf16 tensor cores)",
                   m_device_name, m_cc_major, m_cc_minor);
    US_CUDA_CHECK(cudaStreamCreateWithFlags(&m_compute, cudaStreamNonBlocking));
    US_CUDA_CHECK(cudaStreamCreateWithFlags(&m_comm, cudaStreamNonBlocking));
    m_allocator = std::make_unique<TrackedAllocator>(
        std::make_unique<DeviceMemory>(fmt::format("cuda:{} ({})", device, m_device_name)));
    US_CUBLAS_CHECK(cublasCreate(&m_cublas));
    US_CUBLAS_CHECK(cublasSetStream(m_cublas, m_compute));
    // Plain fp32 (no TF32) keeps fp32 runs comparable with the CPU backend to 1e-5; bf16 uses tensor cores anyway.
    US_CUBLAS_CHECK(cublasSetMathMode(m_cublas, CUBLAS_DEFAULT_MATH));
    // cuBLAS's workspace comes from our allocator, so it shows up in the memory anatomy.
    constexpr size_t kCublasWorkspace = size_t(32) << 20;
    m_cublas_workspace = m_allocator->allocate(kCublasWorkspace, MemCategory::workspace, "cuBLAS workspace");
    US_CUBLAS_CHECK(cublasSetWorkspace(m_cublas, m_cublas_workspace.data(), kCublasWorkspace));
    // cuBLASLt shares the workspace: both run on the compute stream, one GEMM at a time.
    m_lt = std::make_unique<cuda::LtLinear>(m_cublas_workspace.data(), kCublasWorkspace);
    // the partials, the result, and sum_deferred's running total (zero to start)
    m_reduce = m_allocator->allocate((cuda::reduce_partials_doubles() + 2) * sizeof(double), MemCategory::workspace,
                                     "reduction partials");
    US_CUDA_CHECK(
        cudaMemsetAsync(m_reduce.data(), 0, (cuda::reduce_partials_doubles() + 2) * sizeof(double), m_compute));
    US_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&m_reduce_host), sizeof(double)));
    for (Staging& s : m_staging) US_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
}

CudaBackend::~CudaBackend() {
    cudaStreamSynchronize(m_compute);
    cudaStreamSynchronize(m_comm);
    for (Staging& s : m_staging) {
        if (s.host) cudaFreeHost(s.host);
        if (s.done) cudaEventDestroy(s.done);
    }
    if (m_reduce_host) cudaFreeHost(m_reduce_host);
    m_cudnn.reset();
    m_lt.reset();
    m_cublas_workspace.reset();
    m_scratch.reset();
    m_rope.reset();
    m_reduce.reset();
    if (m_cublas) cublasDestroy(m_cublas);
    m_allocator.reset();
    cudaStreamDestroy(m_compute);
    cudaStreamDestroy(m_comm);
}

std::string CudaBackend::device_description() const {
    return fmt::format("cuda:{} ({}, sm_{}{}, {} SMs)", m_device, m_device_name, m_cc_major, m_cc_minor, m_sm_count);
}

int64_t CudaBackend::device_used_bytes() const {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return int64_t(total - free);
}

DevicePeak CudaBackend::peak_flops(bool bf16) const {
    if (auto p = datasheet_peak(m_device_name, bf16)) return *p;
    int clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, m_device) != cudaSuccess) return {};
    return estimated_gpu_peak(m_sm_count, clock_khz, m_cc_major, m_cc_minor, bf16);
}

void* CudaBackend::scratch(size_t bytes) {
    if (m_scratch.bytes() < bytes) {
        m_scratch.reset();
        m_scratch = m_allocator->allocate(bytes, MemCategory::workspace, "cuda op scratch");
    }
    return m_scratch.data();
}

const float* CudaBackend::rope_table(int T, int HD) {
    if (T != m_rope_T || HD != m_rope_HD) {
        const int half = HD / 2;
        std::vector<float> host(size_t(2) * T * half);
        for (int t = 0; t < T; ++t)
            for (int i = 0; i < half; ++i) {
                const double angle = double(t) * std::pow(10000.0, -2.0 * i / double(HD));
                host[size_t(t) * half + i] = float(std::cos(angle));
                host[size_t(T) * half + size_t(t) * half + i] = float(std::sin(angle));
            }
        m_rope.reset();
        m_rope = m_allocator->allocate(host.size() * sizeof(float), MemCategory::workspace, "rope table");
        US_CUDA_CHECK(cudaMemcpyAsync(m_rope.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                                      m_compute));
        US_CUDA_CHECK(cudaStreamSynchronize(m_compute));  // `host` goes out of scope
        m_rope_T = T;
        m_rope_HD = HD;
    }
    return static_cast<const float*>(m_rope.data());
}

// ---- GEMM

void CudaBackend::gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a,
                               DType a_type, int lda, long long stride_a, const void* b, DType b_type, int ldb,
                               long long stride_b, float beta, void* c, DType c_type, int ldc, long long stride_c,
                               int batch) {
    // Row-major C (m, n) = op(A) op(B) is column-major C^T (n, m) = op(B)^T op(A)^T: swap the operands.
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
        US_CUBLAS_CHECK(cublasGemmEx(m_cublas, op_b, op_a, n, m, k, &alpha, b, cuda_type(b_type), ldb, a,
                                     cuda_type(a_type), lda, &beta, c, cuda_type(c_type), ldc, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    else
        US_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            m_cublas, op_b, op_a, n, m, k, &alpha, b, cuda_type(b_type), ldb, stride_b, a, cuda_type(a_type), lda,
            stride_a, &beta, c, cuda_type(c_type), ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::gemm(const GemmArgs& g) {
    US_ASSERT(g.a.dtype == g.b.dtype, "gemm operands differ in dtype ({} vs {})", dtype_name(g.a.dtype),
              dtype_name(g.b.dtype));
    US_ASSERT(g.a.dtype == DType::bf16 || g.c.dtype == DType::f32, "fp32 gemm writes fp32");
    if (g.m == 0 || g.n == 0) return;
    gemm_batched(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a.data, g.a.dtype, g.lda, 0, g.b.data, g.b.dtype,
                 g.ldb, 0, g.beta, g.c.data, g.c.dtype, g.ldc, 0, 1);
    if (m_progress_hook) m_progress_hook();
}

// bf16 layers take one cuBLASLt GEMM with the bias in its epilogue and the residual as its C operand; fp32 runs
// (compared with the CPU at 1e-5) and any case cuBLASLt has no algorithm for take the GEMM and the bias kernel.
void CudaBackend::linear_forward(const GemmArgs& g, Tensor residual, Tensor bias) {
    if (g.a.dtype == DType::bf16 && g.m > 0 && g.n > 0 && m_lt->forward(g, residual, bias, m_compute)) {
        if (m_progress_hook) m_progress_hook();
        return;
    }
    Backend::linear_forward(g, residual, bias);
}

// bf16: the GeLU in the GEMM's epilogue (cuBLASLt); otherwise, or without an algorithm, the GEMM and the kernel.
void CudaBackend::linear_gelu_forward(const GemmArgs& g, Tensor bias, Tensor pre) {
    if (g.a.dtype == DType::bf16 && g.m > 0 && g.n > 0 && pre.dtype == g.c.dtype &&
        m_lt->gelu_forward(g, bias, pre, m_compute)) {
        if (m_progress_hook) m_progress_hook();
        return;
    }
    Backend::linear_gelu_forward(g, bias, pre);
}

void CudaBackend::linear_dgelu_backward(const GemmArgs& g, Tensor pre) {
    if (g.a.dtype == DType::bf16 && g.m > 0 && g.n > 0 && pre.dtype == g.c.dtype &&
        m_lt->dgelu_backward(g, pre, m_compute)) {
        if (m_progress_hook) m_progress_hook();
        return;
    }
    Backend::linear_dgelu_backward(g, pre);
}

void CudaBackend::add_bias(Tensor out, Tensor bias, int N, int OC) {
    cuda::add_bias(out.data, out.dtype, bias.data, bias.dtype, N, OC, m_compute);
}

void CudaBackend::bias_backward(Tensor dbias, Tensor dout, int N, int OC) {
    auto* partials = static_cast<float*>(scratch(cuda::bias_partials_floats(N, OC) * sizeof(float)));
    cuda::bias_backward(dbias.data, dbias.dtype, dout.data, dout.dtype, N, OC, partials, m_compute);
}

// ---- LayerNorm, GeLU, RoPE

void CudaBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias, int N,
                                    int C) {
    cuda::layernorm_forward(out.data, mean.f32(), rstd.f32(), inp.data, weight.data, bias.data, inp.dtype, N, C,
                            m_compute);
}

void CudaBackend::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                     Tensor mean, Tensor rstd, int N, int C) {
    auto* partials = static_cast<float*>(scratch(cuda::layernorm_partials_floats(N, C) * sizeof(float)));
    cuda::layernorm_backward(dinp.data, dweight.data, dbias.data, dout.data, inp.data, weight.data, mean.f32(),
                             rstd.f32(), inp.dtype, N, C, partials, m_compute);
}

void CudaBackend::gelu_forward(Tensor out, Tensor inp) {
    cuda::gelu_forward(out.data, inp.data, inp.dtype, inp.numel, m_compute);
}

void CudaBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
    cuda::gelu_backward(dinp.data, inp.data, dout.data, inp.dtype, inp.numel, m_compute);
}

// The table must reach the largest position: positions tensors live for the run, so their maximum is read back once.
int CudaBackend::rope_rows(int T, Tensor positions) {
    if (positions.empty()) return T;
    auto it = m_positions_rows.find(positions.data);
    if (it != m_positions_rows.end()) return it->second;
    std::vector<int32_t> host(size_t(positions.numel));
    download(host.data(), positions);
    const int rows = *std::max_element(host.begin(), host.end()) + 1;
    m_positions_rows[positions.data] = rows;
    return rows;
}

void CudaBackend::rope_forward(Tensor qkv, int B, int T, int NH, int HD, Tensor positions) {
    const int rows = std::max(T, rope_rows(T, positions));
    const float* table = rope_table(rows, HD);
    cuda::rope(qkv.data, qkv.dtype, table, table + size_t(rows) * (HD / 2),
               positions.empty() ? nullptr : positions.i32(), B, T, NH, HD, 1.0f, m_compute);
}

void CudaBackend::rope_backward(Tensor dqkv, int B, int T, int NH, int HD, Tensor positions) {
    const int rows = std::max(T, rope_rows(T, positions));
    const float* table = rope_table(rows, HD);
    cuda::rope(dqkv.data, dqkv.dtype, table, table + size_t(rows) * (HD / 2),
               positions.empty() ? nullptr : positions.i32(), B, T, NH, HD, -1.0f, m_compute);
}

// ---- mixture of experts

void CudaBackend::moe_route(Tensor probs, Tensor topk, Tensor gates, int N, int E, int K) {
    cuda::moe_route(probs.f32(), topk.i32(), gates.f32(), N, E, K, m_compute);
}

void CudaBackend::moe_route_backward(Tensor dlogits, Tensor probs, Tensor topk, Tensor gates, Tensor dgates, Tensor aux,
                                     int N, int E, int K, int tokens_per_seq) {
    cuda::moe_route_backward(dlogits.f32(), probs.f32(), topk.i32(), gates.f32(), dgates.f32(),
                             aux.empty() ? nullptr : aux.f32(), N, E, K, tokens_per_seq, m_compute);
}

void CudaBackend::moe_dispatch(Tensor out, Tensor x, Tensor rows, int N, int K, int C) {
    cuda::moe_dispatch(out.data, x.data, x.dtype, rows.i32(), N, K, C, m_compute);
}

void CudaBackend::moe_dispatch_backward(Tensor dx, Tensor dout, Tensor rows, int N, int K, int C) {
    cuda::moe_dispatch_backward(dx.data, dout.data, dx.dtype, rows.i32(), N, K, C, m_compute);
}

void CudaBackend::moe_combine(Tensor out, Tensor y, Tensor rows, Tensor gates, int N, int K, int C) {
    cuda::moe_combine(out.data, y.data, out.dtype, rows.i32(), gates.f32(), N, K, C, m_compute);
}

void CudaBackend::moe_combine_backward(Tensor dy, Tensor dgates, Tensor dout, Tensor y, Tensor rows, Tensor gates,
                                       int N, int K, int C) {
    cuda::moe_combine_backward(dy.data, dgates.f32(), dout.data, y.data, dout.dtype, rows.i32(), gates.f32(), N, K, C,
                               m_compute);
}

void CudaBackend::gather_rows(Tensor dst, Tensor src, Tensor index, int M, int C) {
    cuda::gather_rows(dst.data, src.data, src.dtype, index.i32(), M, C, m_compute);
}

// ---- blockwise attention (ring attention under context parallelism)

namespace {
cuda::ChunkPairs chunk_pairs(const AttentionBlockArgs& a) {
    cuda::ChunkPairs p;
    US_ASSERT(a.pair_count <= cuda::ChunkPairs::kMax, "{} chunk pairs in one call (at most {})", a.pair_count,
              cuda::ChunkPairs::kMax);
    p.count = a.pair_count;
    for (int i = 0; i < a.pair_count; ++i) {
        p.q_chunk[i] = a.pairs[i].q_chunk;
        p.k_chunk[i] = a.pairs[i].k_chunk;
        p.causal[i] = a.pairs[i].causal;
    }
    return p;
}
}  // namespace

void CudaBackend::attention_block_forward(const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum) {
    cuda::attention_block_forward(acc.f32(), row_max.f32(), row_sum.f32(), a.qkv.data, a.kv.data, a.kv_row_stride(),
                                  a.qkv.dtype, a.B, a.T, a.NH, a.HD, a.chunk, chunk_pairs(a), m_compute);
}

void CudaBackend::attention_block_finish(Tensor out, Tensor lse, Tensor acc, Tensor row_max, Tensor row_sum, int B,
                                         int T, int NH, int HD) {
    cuda::attention_block_finish(out.data, out.dtype, lse.f32(), acc.f32(), row_max.f32(), row_sum.f32(), B, T, NH, HD,
                                 m_compute);
}

void CudaBackend::attention_block_delta(Tensor delta, Tensor dout, Tensor out, int B, int T, int NH, int HD) {
    cuda::attention_block_delta(delta.f32(), dout.data, out.data, out.dtype, B, T, NH, HD, m_compute);
}

void CudaBackend::attention_block_backward(const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout, Tensor lse,
                                           Tensor delta) {
    cuda::attention_block_backward(dq.f32(), dkv.f32(), a.qkv.data, a.kv.data, a.kv_row_stride(), dout.data,
                                   a.qkv.dtype, lse.f32(), delta.f32(), a.B, a.T, a.NH, a.HD, a.chunk, chunk_pairs(a),
                                   m_compute);
}

namespace {
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

#if !ULTRASCOPE_HAVE_CUDNN_HEADERS
namespace cuda {
class CudnnAttention {};  // never made: use_cudnn_attention refuses
}  // namespace cuda
#endif

namespace {
// k and v read in qkv (one rank's whole sequence): what both fused paths take.
bool kv_in_qkv(const AttentionBlockArgs& a) {
    return a.kv.data == static_cast<const char*>(a.qkv.data) + size_t(a.NH) * a.HD * dtype_size(a.qkv.dtype) &&
           a.kv_row_stride() == 3 * int64_t(a.NH) * a.HD;
}
// One causal block over the whole sequence: the only mask cuDNN's graph here expresses.
bool one_causal_block(const AttentionBlockArgs& a) {
    return a.chunk == a.T && a.pair_count == 1 && a.pairs[0].q_chunk == 0 && a.pairs[0].k_chunk == 0 &&
           a.pairs[0].causal;
}
bool tiles_take_whole(const AttentionBlockArgs& a) {
    return kv_in_qkv(a) &&
           cuda::attention_tiles_apply(a.qkv.dtype, a.T, a.NH, a.HD, a.chunk, a.qkv.data, a.kv.data, a.kv_row_stride());
}
}  // namespace

// One rank's whole sequence on the tensor-core tiles or cuDNN: the kernels write out, lse and dqkv themselves.
bool CudaBackend::fuses_whole_attention(const AttentionBlockArgs& a) const {
    if (!kv_in_qkv(a)) return false;
    if (m_cudnn && one_causal_block(a) &&
        cuda::sdpa_unsupported(a.qkv.dtype, a.B, a.T, a.NH, a.HD, aligned16(a.qkv.data)).empty())
        return true;
    return tiles_take_whole(a);
}

bool CudaBackend::cudnn_takes(const AttentionBlockArgs& a, bool backward, std::initializer_list<const void*> buffers) {
#if !ULTRASCOPE_HAVE_CUDNN_HEADERS
    (void)a, (void)backward, (void)buffers;
    return false;
#else
    if (!m_cudnn) return false;
    bool aligned = aligned16(a.qkv.data);
    for (const void* p : buffers) aligned = aligned && aligned16(p);
    const cuda::SdpaShape shape{a.B, a.T, a.NH, a.HD};
    std::string why = !kv_in_qkv(a) || !one_causal_block(a)
                          ? "not one causal block with k and v in qkv"
                          : cuda::sdpa_unsupported(a.qkv.dtype, a.B, a.T, a.NH, a.HD, aligned);
    if (why.empty()) why = m_cudnn->prepare(shape, backward);
    if (why.empty()) return true;
    const std::string what =
        fmt::format("{} B {} T {} heads {} head dim {}", backward ? "backward" : "forward", a.B, a.T, a.NH, a.HD);
    if (m_cudnn_notices.insert(what).second)
        std::fprintf(stderr,
                     "ultrascope-train: notice: --attention cudnn: cuDNN's fused attention cannot take the %s: %s; "
                     "it runs the flash kernels instead\n",
                     what.c_str(), why.c_str());
    return false;
#endif
}

void CudaBackend::use_cudnn_attention(const std::string& library) {
#if ULTRASCOPE_HAVE_CUDNN_HEADERS
    m_cudnn = std::make_unique<cuda::CudnnAttention>(m_compute, *m_allocator, library);
#else
    fail_user(
        "--attention cudnn: this build has no cuDNN attention (CMake found no cudnn_graph.h/cudnn_backend.h in the CUDA "
        "toolkit); use --attention flash, or rebuild with cuDNN 9's headers ({})",
        library);
#endif
}

std::string CudaBackend::attention_kernels() const {
#if ULTRASCOPE_HAVE_CUDNN_HEADERS
    if (m_cudnn) return m_cudnn->describe() + "; a shape it cannot take runs the mma.sync tiles (a notice names it)";
#endif
    return "mma.sync tiles (bf16, head dim 64), else the blockwise composition";
}

void CudaBackend::attention_whole_forward(const AttentionBlockArgs& a, Tensor out, Tensor lse) {
#if ULTRASCOPE_HAVE_CUDNN_HEADERS
    if (cudnn_takes(a, false, {out.data, lse.data}))
        return m_cudnn->forward({a.B, a.T, a.NH, a.HD}, a.qkv.data, out.data, lse.f32());
#endif
    if (!tiles_take_whole(a) || !aligned16(out.data)) return Backend::attention_whole_forward(a, out, lse);
    cuda::attention_tiles_whole_forward(out.data, lse.f32(), a.qkv.data, a.B, a.T, a.NH, a.chunk, chunk_pairs(a),
                                        1.0f / std::sqrt(float(a.HD)), m_compute);
}

void CudaBackend::attention_whole_backward(const AttentionBlockArgs& a, Tensor dqkv, Tensor dout, Tensor out,
                                           Tensor lse) {
#if ULTRASCOPE_HAVE_CUDNN_HEADERS
    if (cudnn_takes(a, true, {dqkv.data, dout.data, out.data, lse.data}))
        return m_cudnn->backward({a.B, a.T, a.NH, a.HD}, a.qkv.data, out.data, dout.data, lse.f32(), dqkv.data);
#endif
    if (!tiles_take_whole(a) || !aligned16(dout.data) || !aligned16(out.data))
        return Backend::attention_whole_backward(a, dqkv, dout, out, lse);
    const int64_t rows = int64_t(a.B) * a.NH * a.T;
    const Allocation deltas =
        allocator().allocate(size_t(rows) * 4, MemCategory::temporaries, "blockwise attention deltas");
    cuda::attention_tiles_whole_backward(dqkv.data, deltas.view(DType::f32, 0, rows).f32(), a.qkv.data, dout.data,
                                         out.data, lse.f32(), a.B, a.T, a.NH, a.chunk, chunk_pairs(a),
                                         1.0f / std::sqrt(float(a.HD)), m_compute);
}

void CudaBackend::attention_block_pack_kv(Tensor kv, Tensor qkv, int B, int T, int C) {
    cuda::attention_block_pack_kv(kv.data, qkv.data, qkv.dtype, B, T, C, m_compute);
}

void CudaBackend::attention_block_store_grads(Tensor dqkv, Tensor dq, Tensor dkv, int B, int T, int C) {
    cuda::attention_block_store_grads(dqkv.data, dqkv.dtype, dq.f32(), dkv.f32(), B, T, C, m_compute);
}

// ---- attention: per sequence, the heads as one strided batch (head h starts h*HD into each row of qkv)

void CudaBackend::attention_forward(Tensor out, Tensor probs, Tensor qkv, int B, int T, int NH, int HD) {
    const int C = NH * HD;
    const DType x = qkv.dtype;
    const size_t es = dtype_size(x);
    const long long tt = (long long)T * T;
    const float scale = 1.0f / std::sqrt(float(HD));
    // scratch: scores (NH,T,T) fp32, and P (NH,T,T) in the storage type when probs are not kept
    const size_t scores_bytes = size_t(NH) * size_t(tt) * sizeof(float);
    char* work = static_cast<char*>(scratch(scores_bytes + (probs.empty() ? size_t(NH) * size_t(tt) * es : 0)));
    auto* scores = reinterpret_cast<float*>(work);
    for (int b = 0; b < B; ++b) {
        const char* base = static_cast<const char*>(qkv.data) + size_t(b) * T * 3 * C * es;
        const char* q = base;
        const char* k = base + size_t(C) * es;
        const char* v = base + size_t(2) * C * es;
        void* p = probs.empty() ? static_cast<void*>(work + scores_bytes)
                                : static_cast<char*>(probs.data) + size_t(b) * NH * size_t(tt) * es;
        // S = scale * Q K^T
        gemm_batched(false, true, T, T, HD, scale, q, x, 3 * C, HD, k, x, 3 * C, HD, 0.0f, scores, DType::f32, T, tt,
                     NH);
        cuda::causal_softmax(p, x, scores, NH * T, T, m_compute);
        // O = P V, written into the head's columns of out
        gemm_batched(false, false, T, HD, T, 1.0f, p, x, T, tt, v, x, 3 * C, HD, 0.0f,
                     static_cast<char*>(out.data) + size_t(b) * T * C * es, x, C, HD, NH);
    }
}

void CudaBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor probs, int B, int T, int NH, int HD) {
    const int C = NH * HD;
    const DType x = qkv.dtype;
    const size_t es = dtype_size(x);
    const long long tt = (long long)T * T;
    const float scale = 1.0f / std::sqrt(float(HD));
    // scratch: dP (NH,T,T) fp32 (also the scores when recomputing), dS in the storage type, P when not kept
    const size_t f32_bytes = size_t(NH) * size_t(tt) * sizeof(float), x_bytes = size_t(NH) * size_t(tt) * es;
    char* work = static_cast<char*>(scratch(f32_bytes + x_bytes + (probs.empty() ? x_bytes : 0)));
    auto* dprobs = reinterpret_cast<float*>(work);
    void* dscores = work + f32_bytes;
    for (int b = 0; b < B; ++b) {
        const char* base = static_cast<const char*>(qkv.data) + size_t(b) * T * 3 * C * es;
        const char* q = base;
        const char* k = base + size_t(C) * es;
        const char* v = base + size_t(2) * C * es;
        const char* dO = static_cast<const char*>(dout.data) + size_t(b) * T * C * es;
        char* dbase = static_cast<char*>(dqkv.data) + size_t(b) * T * 3 * C * es;
        const void* p;
        if (probs.empty()) {  // selective recompute: P again from Q and K
            void* recomputed = work + f32_bytes + x_bytes;
            gemm_batched(false, true, T, T, HD, scale, q, x, 3 * C, HD, k, x, 3 * C, HD, 0.0f, dprobs, DType::f32, T,
                         tt, NH);
            cuda::causal_softmax(recomputed, x, dprobs, NH * T, T, m_compute);
            p = recomputed;
        } else {
            p = static_cast<const char*>(probs.data) + size_t(b) * NH * size_t(tt) * es;
        }
        // dV = P^T dO
        gemm_batched(true, false, T, HD, T, 1.0f, p, x, T, tt, dO, x, C, HD, 0.0f, dbase + size_t(2) * C * es, x, 3 * C,
                     HD, NH);
        // dP = dO V^T
        gemm_batched(false, true, T, T, HD, 1.0f, dO, x, C, HD, v, x, 3 * C, HD, 0.0f, dprobs, DType::f32, T, tt, NH);
        cuda::causal_softmax_backward(dscores, x, p, x, dprobs, NH * T, T, scale, m_compute);
        // dQ = dS K ; dK = dS^T Q
        gemm_batched(false, false, T, HD, T, 1.0f, dscores, x, T, tt, k, x, 3 * C, HD, 0.0f, dbase, x, 3 * C, HD, NH);
        gemm_batched(true, false, T, HD, T, 1.0f, dscores, x, T, tt, q, x, 3 * C, HD, 0.0f, dbase + size_t(C) * es, x,
                     3 * C, HD, NH);
    }
}

// ---- elementwise, reductions

void CudaBackend::residual_forward(Tensor out, Tensor a, Tensor b) {
    US_ASSERT(out.numel == a.numel && a.numel == b.numel, "residual sizes differ");
    cuda::residual(out.data, a.data, b.data, out.dtype, out.numel, m_compute);
}

void CudaBackend::fill_zero(Tensor t) {
    if (t.bytes()) US_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), m_compute));
}

void CudaBackend::copy(Tensor dst, Tensor src) {
    US_ASSERT(dst.numel == src.numel, "copy of {} elements into {}", src.numel, dst.numel);
    if (src.numel == 0) return;
    if (dst.dtype == src.dtype)
        US_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, m_compute));
    else
        cuda::convert(dst.data, dst.dtype, src.data, src.dtype, src.numel, m_compute);
}

void CudaBackend::accumulate(Tensor acc, Tensor x) {
    US_ASSERT(acc.numel == x.numel, "accumulate of {} elements into {}", x.numel, acc.numel);
    cuda::accumulate(acc.data, acc.dtype, x.data, x.dtype, x.numel, m_compute);
}

void CudaBackend::scale(Tensor t, float factor) { cuda::scale(t.data, t.dtype, t.numel, factor, m_compute); }

double CudaBackend::reduce(Tensor t, bool squares) {
    auto* partials = static_cast<double*>(m_reduce.data());
    double* result = partials + cuda::reduce_partials_doubles();
    cuda::sum(result, t.data, t.dtype, t.numel, squares, partials, m_compute);
    US_CUDA_CHECK(cudaMemcpyAsync(m_reduce_host, result, sizeof(double), cudaMemcpyDeviceToHost, m_compute));
    US_CUDA_CHECK(cudaStreamSynchronize(m_compute));
    return *m_reduce_host;
}

double CudaBackend::sum(Tensor t) { return reduce(t, false); }
double CudaBackend::sum_squares(Tensor t) { return reduce(t, true); }

// The deferred total is a device double after the reduction's partials and result: each sum adds to it on the
// compute stream, and only take_deferred_sum waits.
void CudaBackend::sum_deferred(Tensor t) {
    auto* partials = static_cast<double*>(m_reduce.data());
    double* total = partials + cuda::reduce_partials_doubles() + 1;
    cuda::sum(total, t.data, t.dtype, t.numel, false, partials, m_compute, true);
}

double CudaBackend::take_deferred_sum() {
    auto* partials = static_cast<double*>(m_reduce.data());
    double* total = partials + cuda::reduce_partials_doubles() + 1;
    US_CUDA_CHECK(cudaMemcpyAsync(m_reduce_host, total, sizeof(double), cudaMemcpyDeviceToHost, m_compute));
    US_CUDA_CHECK(cudaMemsetAsync(total, 0, sizeof(double), m_compute));
    US_CUDA_CHECK(cudaStreamSynchronize(m_compute));
    return *m_reduce_host;
}

// ---- embedding, loss, optimizer

void CudaBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, int N, int C, int vocab_begin, int V) {
    cuda::embedding_forward(out.data, tokens.i32(), wte.data, wte.dtype, N, C, vocab_begin, V, m_compute);
}

void CudaBackend::embedding_backward(Tensor dwte, Tensor dout, Tensor tokens, int N, int C, int vocab_begin, int V) {
    const size_t bytes = cuda::embedding_backward_workspace_bytes(N);
    cuda::embedding_backward(dwte.data, dout.data, tokens.i32(), dwte.dtype, N, C, vocab_begin, V, scratch(bytes),
                             bytes, m_compute);
}

void CudaBackend::crossentropy_forward(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    cuda::crossentropy_forward(losses.f32(), logits.f32(), targets.i32(), N, V, m_compute);
}

void CudaBackend::crossentropy_backward(Tensor dlogits, Tensor probs, Tensor targets, float dloss, int N, int V,
                                        int vocab_begin) {
    cuda::crossentropy_backward(dlogits.data, dlogits.dtype, probs.f32(), targets.i32(), dloss, N, V, vocab_begin,
                                m_compute);
}

void CudaBackend::crossentropy_fused(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    US_ASSERT(logits.dtype == DType::bf16, "the fused cross-entropy takes bf16 logits");
    cuda::crossentropy_fused(losses.f32(), logits.data, targets.i32(), N, V, m_compute);
}

void CudaBackend::crossentropy_local_max(Tensor rowmax, Tensor logits, int N, int V, int valid) {
    cuda::crossentropy_local_max(rowmax.f32(), logits.f32(), N, V, valid, m_compute);
}

void CudaBackend::crossentropy_local_sums(Tensor sums, Tensor logits, Tensor rowmax, Tensor targets, int N, int V,
                                          int valid, int vocab_begin) {
    cuda::crossentropy_local_sums(sums.f32(), logits.f32(), rowmax.f32(), targets.i32(), N, V, valid, vocab_begin,
                                  m_compute);
}

void CudaBackend::crossentropy_finish(Tensor losses, Tensor logits, Tensor rowmax, Tensor sums, int N, int V,
                                      int valid) {
    cuda::crossentropy_finish(losses.f32(), logits.f32(), rowmax.f32(), sums.f32(), N, V, valid, m_compute);
}

void CudaBackend::adamw(const AdamWArgs& a) {
    const int64_t n = a.params.numel;
    US_ASSERT(a.grads.numel == n && a.m.numel == n && a.v.numel == n, "adamw ranges differ");
    // The scalars exactly as the CPU backend computes them.
    const double bc1 = 1.0 - std::pow(a.beta1, double(a.step));
    const double bc2 = 1.0 - std::pow(a.beta2, double(a.step));
    cuda::AdamWLaunch l;
    l.params = a.params.data;
    l.master = a.master.empty() ? nullptr : a.master.f32();
    if (!l.master) US_ASSERT(a.params.dtype == DType::f32, "bf16 params need fp32 master weights");
    l.grads = a.grads.data;
    l.grads_type = a.grads.dtype;
    l.m = a.m.f32();
    l.v = a.v.f32();
    l.n = n;
    l.step_size = float(a.lr / bc1);
    l.bc2_sqrt = float(std::sqrt(bc2));
    l.decay = float(1.0 - a.lr * a.weight_decay);
    l.beta1 = float(a.beta1);
    l.one_minus_beta1 = float(1.0 - a.beta1);
    l.beta2 = float(a.beta2);
    l.one_minus_beta2 = float(1.0 - a.beta2);
    l.eps = float(a.eps);
    l.grad_scale = a.grad_scale;
    cuda::adamw(l, m_compute);
}

// ---- host <-> device

void CudaBackend::upload(Tensor dst, const void* host) {
    const size_t bytes = dst.bytes();
    if (bytes == 0) return;
    constexpr size_t kStagedMax = size_t(4) << 20;
    if (bytes > kStagedMax) {  // parameters at start-up, checkpoints: rare and large, copied synchronously
        US_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice, m_compute));
        US_CUDA_CHECK(cudaStreamSynchronize(m_compute));
        return;
    }
    Staging& s = m_staging[m_next_staging];
    m_next_staging = (m_next_staging + 1) % m_staging.size();
    US_CUDA_CHECK(cudaEventSynchronize(s.done));  // the copy that last used this buffer has finished
    if (s.bytes < bytes) {
        if (s.host) US_CUDA_CHECK(cudaFreeHost(s.host));
        US_CUDA_CHECK(cudaMallocHost(&s.host, bytes));
        s.bytes = bytes;
    }
    std::memcpy(s.host, host, bytes);
    US_CUDA_CHECK(cudaMemcpyAsync(dst.data, s.host, bytes, cudaMemcpyHostToDevice, m_compute));
    US_CUDA_CHECK(cudaEventRecord(s.done, m_compute));
}

void CudaBackend::download(void* host, Tensor src) {
    if (src.bytes() == 0) return;
    US_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, m_compute));
    US_CUDA_CHECK(cudaStreamSynchronize(m_compute));
}

void CudaBackend::synchronize() {
    US_CUDA_CHECK(cudaStreamSynchronize(m_compute));
    US_CUDA_CHECK(cudaStreamSynchronize(m_comm));
}

}  // namespace us
