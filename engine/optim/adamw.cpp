#include "engine/optim/adamw.h"

namespace us {

AdamW::AdamW(Backend& backend, const ParamLayout& layout, std::vector<ShardPiece> pieces, int64_t shard_numel,
             Precision precision, const AdamWConfig& config)
    : m_be(backend),
      m_layout(layout),
      m_pieces(std::move(pieces)),
      m_shard_numel(shard_numel),
      m_precision(precision),
      m_config(config) {
    if (precision == Precision::bf16) {
        m_master =
            backend.allocator().allocate(size_t(shard_numel) * 4, MemCategory::master_params, "fp32 master weights");
        m_master_tensor = m_master.all(DType::f32).slice(0, shard_numel);
        backend.fill_zero(m_master_tensor);
    }
}

void AdamW::allocate_moments() {
    if (m_moments) return;
    m_moments = m_be.allocator().allocate(size_t(m_shard_numel) * 8, MemCategory::optimizer_state,
                                          "adam moments (exp_avg, exp_avg_sq)");
    m_m = m_moments.view(DType::f32, 0, m_shard_numel);
    m_v = m_moments.view(DType::f32, m_shard_numel, m_shard_numel);
    m_be.fill_zero(m_moments.view(DType::f32, 0, 2 * m_shard_numel));
}

void AdamW::update_range(Tensor params, Tensor grads, int64_t shard_offset, int64_t n, bool decay, double lr,
                         float clip_coef) {
    AdamWArgs a;
    a.params = params;
    if (m_precision == Precision::bf16) a.master = m_master_tensor.slice(shard_offset, n);
    a.grads = grads;
    a.m = m_m.slice(shard_offset, n);
    a.v = m_v.slice(shard_offset, n);
    a.lr = lr;
    a.beta1 = m_config.beta1;
    a.beta2 = m_config.beta2;
    a.eps = m_config.eps;
    a.weight_decay = decay ? m_config.weight_decay : 0.0;
    a.grad_scale = clip_coef;
    a.step = m_step;
    m_be.adamw(a);
}

}  // namespace us
