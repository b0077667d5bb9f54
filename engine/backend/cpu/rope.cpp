// Rotary position embedding (Su et al. 2021), rotate-half convention (as GPT-NeoX and Llama): dims i and
// i + HD/2 of each head form a pair rotated by t * 10000^(-2i/HD), t the row's position in the sequence (its index,
// or positions[index] under context parallelism). Backward rotates by the negative angle.
#include <algorithm>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

namespace {

template <typename T>
void rotate(T* qkv, const float* cos_table, const float* sin_table, const int32_t* positions, int B, int T_, int NH,
            int HD, float sign) {
    const int C = NH * HD, half = HD / 2;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T_; ++t) {
            const size_t pos = positions ? size_t(positions[t]) : size_t(t);
            const float* cs = cos_table + pos * half;
            const float* sn = sin_table + pos * half;
            T* row = qkv + (size_t(b) * T_ + t) * 3 * C;
            for (int part = 0; part < 2; ++part)  // q, then k; v is not rotated
                for (int h = 0; h < NH; ++h) {
                    T* x = row + part * C + h * HD;
                    for (int i = 0; i < half; ++i) {
                        const float x1 = load(x + i), x2 = load(x + i + half);
                        const float s = sign * sn[i];
                        store(x + i, x1 * cs[i] - x2 * s);
                        store(x + i + half, x2 * cs[i] + x1 * s);
                    }
                }
        }
}

}  // namespace

namespace {
// The table must reach the largest position.
int table_rows(int T, Tensor positions) {
    if (positions.empty()) return T;
    const int32_t* p = positions.i32();
    return int(*std::max_element(p, p + positions.numel)) + 1;
}
}  // namespace

void CpuBackend::rope_forward(Tensor qkv, int B, int T, int NH, int HD, Tensor positions) {
    const int rows = table_rows(T, positions);
    const float* table = rope_table(rows, HD);
    const int32_t* pos = positions.empty() ? nullptr : positions.i32();
    with_typed(qkv, [&](auto* p) { rotate(p, table, table + size_t(rows) * (HD / 2), pos, B, T, NH, HD, 1.0f); });
}

void CpuBackend::rope_backward(Tensor dqkv, int B, int T, int NH, int HD, Tensor positions) {
    const int rows = table_rows(T, positions);
    const float* table = rope_table(rows, HD);
    const int32_t* pos = positions.empty() ? nullptr : positions.i32();
    with_typed(dqkv, [&](auto* p) { rotate(p, table, table + size_t(rows) * (HD / 2), pos, B, T, NH, HD, -1.0f); });
}

}  // namespace us
