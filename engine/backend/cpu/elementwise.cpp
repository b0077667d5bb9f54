// Elementwise ops: residual add, zero, copy/convert, accumulate, scale, and the sum of squares for grad norms.
#include <omp.h>

#include <cstring>
#include <utility>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

void CpuBackend::residual_forward(Tensor out, Tensor a, Tensor b) {
    US_ASSERT(out.numel == a.numel && a.numel == b.numel, "residual sizes differ");
    with_typed(out, [&](auto* o) {
        using T = std::remove_pointer_t<decltype(o)>;
        const T* x = static_cast<const T*>(a.data);
        const T* y = static_cast<const T*>(b.data);
        const int64_t n = out.numel;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) store(o + i, load(x + i) + load(y + i));
    });
}

void CpuBackend::fill_zero(Tensor t) {
    char* p = static_cast<char*>(t.data);
    const int64_t bytes = int64_t(t.bytes());
    const int64_t chunk = 1 << 20;
#pragma omp parallel for schedule(static)
    for (int64_t off = 0; off < bytes; off += chunk) std::memset(p + off, 0, size_t(std::min(chunk, bytes - off)));
}

void CpuBackend::copy(Tensor dst, Tensor src) {
    US_ASSERT(dst.numel == src.numel, "copy of {} elements into {}", src.numel, dst.numel);
    if (dst.dtype == src.dtype) {
        std::memcpy(dst.data, src.data, src.bytes());
        return;
    }
    with_typed(dst, [&](auto* d) {
        with_typed(src, [&](auto* s) {
            const int64_t n = src.numel;
#pragma omp parallel for simd schedule(static)
            for (int64_t i = 0; i < n; ++i) store(d + i, load(s + i));
        });
    });
}

void CpuBackend::upload(Tensor dst, const void* host) { std::memcpy(dst.data, host, dst.bytes()); }
void CpuBackend::download(void* host, Tensor src) { std::memcpy(host, src.data, src.bytes()); }

void CpuBackend::accumulate(Tensor acc, Tensor x) {
    US_ASSERT(acc.numel == x.numel, "accumulate of {} elements into {}", x.numel, acc.numel);
    with_typed(acc, [&](auto* a) {
        with_typed(x, [&](auto* s) {
            const int64_t n = x.numel;
#pragma omp parallel for simd schedule(static)
            for (int64_t i = 0; i < n; ++i) store(a + i, load(a + i) + load(s + i));
        });
    });
}

void CpuBackend::scale(Tensor t, float factor) {
    with_typed(t, [&](auto* p) {
        const int64_t n = t.numel;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) store(p + i, load(p + i) * factor);
    });
}

// Fixed partition, partials summed in thread order: the same bits on every run with the same thread count.
template <bool kSquare>
static double deterministic_sum(Tensor t, int threads) {
    std::vector<double> partial(size_t(threads), 0.0);
    with_typed(t, [&](auto* p) {
        const int64_t n = t.numel;
#pragma omp parallel num_threads(threads)
        {
            const int id = omp_get_thread_num(), team = omp_get_num_threads();
            const int64_t lo = n * id / team, hi = n * (id + 1) / team;
            double s = 0.0;
            for (int64_t i = lo; i < hi; ++i) {
                const double v = load(p + i);
                s += kSquare ? v * v : v;
            }
            partial[size_t(id)] = s;
        }
    });
    double total = 0.0;
    for (double s : partial) total += s;
    return total;
}

double CpuBackend::sum(Tensor t) { return deterministic_sum<false>(t, m_threads); }
double CpuBackend::sum_squares(Tensor t) { return deterministic_sum<true>(t, m_threads); }
void CpuBackend::sum_deferred(Tensor t) { m_deferred_sum += sum(t); }
double CpuBackend::take_deferred_sum() { return std::exchange(m_deferred_sum, 0.0); }

}  // namespace us
