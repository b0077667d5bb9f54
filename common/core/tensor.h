// A tensor here is a typed view into memory owned by someone else (a flat parameter buffer, an activation
// block). Shapes travel as explicit dimension arguments, llm.c style, so a view is just pointer, type, count.
#pragma once

#include <cstdint>

#include "common/core/check.h"
#include "common/core/dtype.h"

namespace us {

struct Tensor {
    void* data = nullptr;
    DType dtype = DType::f32;
    int64_t numel = 0;

    static Tensor of(float* p, int64_t n) { return Tensor{p, DType::f32, n}; }
    static Tensor of(bf16* p, int64_t n) { return Tensor{p, DType::bf16, n}; }
    static Tensor of(int32_t* p, int64_t n) { return Tensor{p, DType::i32, n}; }
    static Tensor of(void* p, DType t, int64_t n) { return Tensor{p, t, n}; }

    size_t bytes() const { return size_t(numel) * dtype_size(dtype); }
    bool empty() const { return data == nullptr || numel == 0; }

    Tensor slice(int64_t offset, int64_t count) const {
        US_ASSERT(offset >= 0 && count >= 0 && offset + count <= numel, "slice [{}, +{}) of {}", offset, count, numel);
        return Tensor{static_cast<char*>(data) + offset * int64_t(dtype_size(dtype)), dtype, count};
    }

    float* f32() const {
        US_ASSERT(dtype == DType::f32, "tensor is {}, not fp32", dtype_name(dtype));
        return static_cast<float*>(data);
    }
    bf16* b16() const {
        US_ASSERT(dtype == DType::bf16, "tensor is {}, not bf16", dtype_name(dtype));
        return static_cast<bf16*>(data);
    }
    int32_t* i32() const {
        US_ASSERT(dtype == DType::i32, "tensor is {}, not int32", dtype_name(dtype));
        return static_cast<int32_t*>(data);
    }
};

// Calls fn with a typed pointer for a floating tensor's storage: fn((float*)p) or fn((bf16*)p).
template <typename Fn>
decltype(auto) with_typed(const Tensor& t, Fn&& fn) {
    US_ASSERT(t.dtype != DType::i32, "expected a floating-point tensor");
    if (t.dtype == DType::f32) return fn(static_cast<float*>(t.data));
    return fn(static_cast<bf16*>(t.data));
}

}  // namespace us
