// Element types of tensors. bf16 is stored as its 16 raw bits; arithmetic always happens in fp32 and results are
// rounded to nearest-even on store, as PyTorch and the hardware do.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace us {

// i32 holds token ids; f32 and bf16 hold everything else.
enum class DType : uint8_t { f32 = 0, bf16 = 1, i32 = 2 };

constexpr size_t dtype_size(DType t) { return t == DType::bf16 ? 2 : 4; }
constexpr std::string_view dtype_name(DType t) {
    return t == DType::f32 ? "fp32" : t == DType::bf16 ? "bf16" : "int32";
}

// A bf16 value as its raw bits. A distinct type (not uint16_t) so that templated ops overload on it.
struct bf16 {
    uint16_t bits;
};

inline float bf16_to_f32(bf16 x) {
    uint32_t u = uint32_t(x.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Round to nearest, ties to even; NaN stays NaN (quiet bit forced so rounding never turns it into infinity).
inline bf16 f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{uint16_t(u >> 16)};
}

// Uniform load/store so that one templated kernel serves both storage types.
inline float load(const float* p) { return *p; }
inline float load(const bf16* p) { return bf16_to_f32(*p); }
inline void store(float* p, float v) { *p = v; }
inline void store(bf16* p, float v) { *p = f32_to_bf16(v); }

}  // namespace us
