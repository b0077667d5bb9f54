// Token embedding lookup and its backward (a scatter-add into the rows of the used tokens). Under
// vocabulary-parallel tensor parallelism wte holds rows [vocab_begin, vocab_begin + V) of the vocabulary: other
// tokens embed to zeros here (another rank holds their row) and leave the gradient alone.
#include <omp.h>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

void CpuBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, int N, int C, int vocab_begin, int V) {
    const int32_t* tok = tokens.i32();
    with_typed(wte, [&](auto* w) {
        using T = std::remove_pointer_t<decltype(w)>;
        T* o = static_cast<T*>(out.data);
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; ++n) {
            const int row = tok[n] - vocab_begin;
            T* dst = o + size_t(n) * C;
            if (row < 0 || row >= V) {
                for (int i = 0; i < C; ++i) dst[i] = T{};
                continue;
            }
            const T* src = w + size_t(row) * C;
            for (int i = 0; i < C; ++i) dst[i] = src[i];
        }
    });
}

// Each thread owns a slice of the channels and walks all tokens in order: no races, a fixed summation order.
void CpuBackend::embedding_backward(Tensor dwte, Tensor dout, Tensor tokens, int N, int C, int vocab_begin, int V) {
    const int32_t* tok = tokens.i32();
    with_typed(dwte, [&](auto* dw) {
        using T = std::remove_pointer_t<decltype(dw)>;
        const T* d = static_cast<const T*>(dout.data);
#pragma omp parallel
        {
            const int id = omp_get_thread_num(), team = omp_get_num_threads();
            const int lo = int(int64_t(C) * id / team), hi = int(int64_t(C) * (id + 1) / team);
            for (int n = 0; n < N; ++n) {
                const int r = tok[n] - vocab_begin;
                if (r < 0 || r >= V) continue;
                T* row = dw + size_t(r) * C;
                const T* g = d + size_t(n) * C;
                for (int i = lo; i < hi; ++i) store(row + i, load(row + i) + load(g + i));
            }
        }
    });
}

}  // namespace us
