// The strides that let cuDNN read q, k, v in qkv and write the gradients into dqkv in place (cudnn_sdpa_layout.h).
#include "engine/backend/cuda/cudnn_sdpa_layout.h"

#include <fmt/format.h>

namespace us::cuda {

SdpaLayout sdpa_layout(int B, int T, int NH, int HD) {
    const int64_t C = int64_t(NH) * HD, row3 = 3 * C;  // a token's row in qkv: q then k then v, head h at h HD
    (void)B;
    SdpaLayout l;
    const std::array<int64_t, 4> bhsd{B, NH, T, HD}, bhds{B, NH, HD, T};
    const std::array<int64_t, 4> in_qkv{T * row3, HD, row3, 1}, in_qkv_t{T * row3, HD, 1, row3};
    l.q = {bhsd, in_qkv, 0};
    l.k = {bhsd, in_qkv, C};
    l.v = {bhsd, in_qkv, 2 * C};
    l.k_t = {bhds, in_qkv_t, C};
    l.v_t = {bhds, in_qkv_t, 2 * C};
    l.o = {bhsd, {T * C, HD, C, 1}, 0};
    l.stats = {{B, NH, T, 1}, {int64_t(NH) * T, T, 1, 1}, 0};
    return l;
}

std::string sdpa_unsupported(DType t, int B, int T, int NH, int HD, bool buffers_aligned) {
    if (t != DType::bf16) return fmt::format("cuDNN's fused attention takes bf16 here, not {}", dtype_name(t));
    if (B < 1 || T < 1 || NH < 1) return fmt::format("an empty shape (B {}, T {}, heads {})", B, T, NH);
    if (HD % 8 != 0 || HD > 128) return fmt::format("head dim {} (cuDNN's takes multiples of 8 up to 128)", HD);
    if (!buffers_aligned) return "a buffer not 16-byte aligned";
    return {};
}

}  // namespace us::cuda
