// A Backend that records a span per op (with its class and FLOPs) and forwards to the real backend. The model and
// the backends stay free of instrumentation; the trainer wraps the backend only when profiling is on. On an async
// backend (CUDA) the spans are host-side launches and go to the host lane; kernel times come from CUPTI.
#pragma once

#include <memory>

#include "engine/backend/backend.h"

namespace us {

class ProfiledBackend final : public Backend {
public:
    explicit ProfiledBackend(Backend& inner) : m_inner(inner) {}
    std::string_view name() const override { return m_inner.name(); }
    std::string device_description() const override { return m_inner.device_description(); }
    TrackedAllocator& allocator() override { return m_inner.allocator(); }
    bool is_async() const override { return m_inner.is_async(); }
    DevicePeak peak_flops(bool bf16) const override { return m_inner.peak_flops(bf16); }
    int64_t device_used_bytes() const override { return m_inner.device_used_bytes(); }
    Backend& inner() { return m_inner; }

    US_BACKEND_OPS(US_BACKEND_DECLARE_OVERRIDE)
    void linear_forward(const GemmArgs& args, Tensor residual, Tensor bias) override;
    bool fuses_whole_attention(const AttentionBlockArgs& a) const override;
    std::string attention_kernels() const override { return m_inner.attention_kernels(); }
    bool fuses_gelu_epilogues(DType t) const override { return m_inner.fuses_gelu_epilogues(t); }
    void linear_gelu_forward(const GemmArgs& args, Tensor bias, Tensor pre) override;
    void linear_dgelu_backward(const GemmArgs& args, Tensor pre) override;
    void attention_whole_forward(const AttentionBlockArgs& a, Tensor out, Tensor lse) override;
    void attention_whole_backward(const AttentionBlockArgs& a, Tensor dqkv, Tensor dout, Tensor out,
                                  Tensor lse) override;
    void synchronize() override { m_inner.synchronize(); }
    void set_progress_hook(void (*hook)()) override { m_inner.set_progress_hook(hook); }

private:
    Backend& m_inner;
};

}  // namespace us
