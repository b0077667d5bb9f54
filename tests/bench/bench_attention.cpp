// The CPU backend's two causal attention kernels side by side, fp32, on the PyTorch comparison's heads (B = 8,
// 4 heads of 64): `--attention naive` (the (T,T) probabilities written in forward, read in backward) and `flash`
// (one causal chunk pair through the blockwise ops: online softmax, probabilities recomputed in backward). Forward
// and backward wall time, best of the repetitions after a warm-up, and the GFLOP/s they make of the multiply-adds
// of causal row blocks: 2 products forward for both, 4 backward for naive, 5 for flash (it recomputes Q K^T). The
// register tiles also leave out the masked tiles inside the diagonal blocks, so their rate is an effective one. Also
// the memory each keeps between forward and backward. Each row names the path of the products (small_sgemm.h):
// OpenBLAS, and the AVX2 register tiles where the CPU has them, run side by side. Usage: bench_attention [repetitions,
// default 3] [threads...; default 1 2]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/backend/cpu/blas_kernel.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/small_sgemm.h"
#include "tests/bench/bench_timing.h"

extern "C" char* openblas_get_corename(void);

using namespace us;
using us::bench::best_seconds;

namespace {

constexpr int kB = 8, kNH = 4, kHD = 64, kC = kNH * kHD;
constexpr int kBlock = 64;  // the kernels' query/key block

// Multiply-adds of one (T x T x HD) causal product taken by 64-row blocks, each over the keys up to its last row.
double causal_block_macs(int T) {
    double keys = 0;
    for (int r0 = 0; r0 < T; r0 += kBlock) keys += double(std::min(T, r0 + kBlock) - r0) * std::min(T, r0 + kBlock);
    return keys * kHD * kB * kNH;
}

std::vector<float> random_values(size_t n, unsigned seed) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = float(seed >> 8) / float(1u << 24) - 0.5f;
    }
    return v;
}

Tensor view(std::vector<float>& v) { return Tensor::of(v.data(), int64_t(v.size())); }

struct Timing {
    double forward_s, backward_s;
};

Timing time_naive(CpuBackend& be, int T, int reps, std::vector<float>& qkv, std::vector<float>& dout) {
    std::vector<float> out(size_t(kB) * T * kC), probs(size_t(kB) * kNH * T * T), dqkv(qkv.size());
    Timing t{};
    t.forward_s = best_seconds(reps, [&] { be.attention_forward(view(out), view(probs), view(qkv), kB, T, kNH, kHD); });
    t.backward_s = best_seconds(
        reps, [&] { be.attention_backward(view(dqkv), view(dout), view(qkv), view(probs), kB, T, kNH, kHD); });
    return t;
}

Timing time_flash(CpuBackend& be, int T, int reps, std::vector<float>& qkv, std::vector<float>& dout) {
    std::vector<float> acc(size_t(kB) * T * kC), mx(size_t(kB) * kNH * T), sm(mx.size()), out(acc.size()),
        lse(mx.size()), delta(mx.size()), dq(acc.size()), dkv(size_t(kB) * T * 2 * kC), dqkv(qkv.size());
    const AttentionChunkPair pair{0, 0, true};
    const AttentionBlockArgs args{
        view(qkv), view(qkv).slice(kC, int64_t(qkv.size()) - kC), kB, T, kNH, kHD, T, &pair, 1, 3 * kC};
    Timing t{};
    // As the engine runs it: the running state zeroed, the blocks, the normalisation.
    t.forward_s = best_seconds(reps, [&] {
        be.fill_zero(view(acc)), be.fill_zero(view(mx)), be.fill_zero(view(sm));
        be.attention_block_forward(args, view(acc), view(mx), view(sm));
        be.attention_block_finish(view(out), view(lse), view(acc), view(mx), view(sm), kB, T, kNH, kHD);
    });
    t.backward_s = best_seconds(reps, [&] {
        be.fill_zero(view(dq)), be.fill_zero(view(dkv));
        be.attention_block_delta(view(delta), view(dout), view(out), kB, T, kNH, kHD);
        be.attention_block_backward(args, view(dq), view(dkv), view(dout), view(lse), view(delta));
        be.attention_block_store_grads(view(dqkv), view(dq), view(dkv), kB, T, kC);
    });
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    us::cpu::ensure_openblas_kernel(argv);  // the kernels the trainer runs on (blas_kernel.h)
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    std::vector<int> thread_counts;
    for (int i = 2; i < argc; ++i) thread_counts.push_back(std::max(1, std::atoi(argv[i])));
    if (thread_counts.empty()) thread_counts = {1, 2};
    std::printf(
        "Causal attention, fp32, B = %d, %d heads of %d: naive (probabilities kept) vs flash (blockwise, "
        "recomputed)\n",
        kB, kNH, kHD);
    std::printf(
        "OpenBLAS core: %s | AVX-512 BF16: %s | measured: best of %d after a warm-up; GFLOP/s of the "
        "causal row blocks' multiply-adds\n\n",
        openblas_get_corename(), us::cpu::cpu_supports_avx512_bf16() ? "yes" : "no", reps);
    std::vector<cpu::SmallSgemmPath> paths{cpu::SmallSgemmPath::blas};
    if (cpu::small_sgemm_tiles_supported()) paths.push_back(cpu::SmallSgemmPath::tiles);
    const cpu::SmallSgemmPath default_path = cpu::small_sgemm_path();
    std::printf("products: %s by default on this CPU; each row below names the one it ran\n\n",
                cpu::small_sgemm_path_name(default_path));
    std::printf("%5s %3s %-7s | %10s %10s %8s %8s | %10s %10s %8s %8s | %9s %9s | %11s %11s\n", "T", "thr", "prod",
                "naive fwd", "naive bwd", "GF/s", "GF/s", "flash fwd", "flash bwd", "GF/s", "GF/s", "fwd ratio",
                "f+b ratio", "naive keeps", "flash keeps");
    for (int T : {256, 1024, 2048}) {
        std::vector<float> qkv = random_values(size_t(kB) * T * 3 * kC, 7),
                           dout = random_values(size_t(kB) * T * kC, 9);
        const double product_gflop = 2.0 * causal_block_macs(T) * 1e-9;
        for (int threads : thread_counts) {
            CpuBackend be(threads);
            std::vector<Timing> naive_f_b, flash_f_b;
            for (cpu::SmallSgemmPath path : paths) {  // side by side, on the same inputs and threads
                cpu::set_small_sgemm_path(path);
                const Timing n = time_naive(be, T, reps, qkv, dout);
                const Timing f = time_flash(be, T, reps, qkv, dout);
                naive_f_b.push_back(n), flash_f_b.push_back(f);
                // kept for backward beyond the output: naive the probabilities, flash one log-sum-exp per row
                const double naive_mib = double(kB) * kNH * T * T * 4 / 1048576.0,
                             flash_mib = double(kB) * kNH * T * 4 / 1048576.0;
                std::printf(
                    "%5d %3d %-7s | %8.1f ms %8.1f ms %8.1f %8.1f | %8.1f ms %8.1f ms %8.1f %8.1f | %8.2fx "
                    "%8.2fx | %7.1f MiB %7.2f MiB\n",
                    T, threads, path == cpu::SmallSgemmPath::tiles ? "tiles" : "openblas", n.forward_s * 1e3,
                    n.backward_s * 1e3, 2 * product_gflop / n.forward_s, 4 * product_gflop / n.backward_s,
                    f.forward_s * 1e3, f.backward_s * 1e3, 2 * product_gflop / f.forward_s,
                    5 * product_gflop / f.backward_s, n.forward_s / f.forward_s,
                    (n.forward_s + n.backward_s) / (f.forward_s + f.backward_s), naive_mib, flash_mib);
            }
            if (paths.size() == 2) {
                auto total = [](const Timing& t) { return t.forward_s + t.backward_s; };
                std::printf("%5d %3d tiles vs openblas, forward + backward: naive %.2fx, flash %.2fx faster\n", T,
                            threads, total(naive_f_b[0]) / total(naive_f_b[1]),
                            total(flash_f_b[0]) / total(flash_f_b[1]));
            }
        }
    }
    cpu::set_small_sgemm_path(default_path);
    std::printf("\nfwd and f+b ratios: naive time / flash time (above 1: flash is faster)\n");
}
