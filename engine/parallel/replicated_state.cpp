#include "engine/parallel/replicated_state.h"
#include "engine/comm/flight_frames.h"

#include <vector>

#include "engine/model/init.h"

namespace us {

void upload_converted(Backend& backend, Tensor dst, const float* values) {
    if (dst.dtype == DType::f32) {
        backend.upload(dst, values);
        return;
    }
    std::vector<bf16> staged(size_t(dst.numel));
    for (size_t i = 0; i < staged.size(); ++i) staged[i] = f32_to_bf16(values[i]);
    backend.upload(dst, staged.data());
}

void download_converted(Backend& backend, float* values, Tensor src) {
    if (src.dtype == DType::f32) {
        backend.download(values, src);
        return;
    }
    std::vector<bf16> staged(size_t(src.numel));
    backend.download(staged.data(), src);
    for (size_t i = 0; i < staged.size(); ++i) values[i] = bf16_to_f32(staged[i]);
}

ReplicatedState::ReplicatedState(Backend& backend, const ParamLayout& layout, Precision precision, bool fp32_grad_accum,
                                 const AdamWConfig& adamw, GradientSync* sync)
    : m_be(backend),
      m_layout(layout),
      m_precision(precision),
      m_fp32_grad_accum(fp32_grad_accum && precision == Precision::bf16),
      m_sync(sync) {
    const DType e = compute_dtype(precision);
    const int64_t n = layout.total();
    m_params = backend.allocator().allocate(size_t(n) * dtype_size(e), MemCategory::params, "parameters");
    m_params_tensor = m_params.view(e, 0, n);
    m_adamw = std::make_unique<AdamW>(backend, layout, std::vector<ShardPiece>{{0, 0, n}}, n, precision, adamw);
}

Tensor ReplicatedState::unit_slice(Tensor flat, int unit) const {
    const ParamUnit& u = m_layout.units()[size_t(unit)];
    return flat.slice(u.offset, u.numel);
}

Tensor ReplicatedState::weights(int unit) { return unit_slice(m_params_tensor, unit); }

// Gradients appear at the first backward, as in PyTorch.
void ReplicatedState::ensure_grads() {
    if (m_grads) return;
    const DType e = compute_dtype(m_precision);
    const int64_t n = m_layout.total();
    m_grads = m_be.allocator().allocate(size_t(n) * dtype_size(e), MemCategory::grads, "gradients");
    m_grads_tensor = m_grads.view(e, 0, n);
    m_be.fill_zero(m_grads_tensor);
    if (m_fp32_grad_accum) {
        m_accum32 = m_be.allocator().allocate(size_t(n) * 4, MemCategory::grads, "fp32 gradient accumulation");
        m_accum32_tensor = m_accum32.view(DType::f32, 0, n);
        m_be.fill_zero(m_accum32_tensor);
    }
}

Tensor ReplicatedState::grads(int unit) {
    ensure_grads();
    return unit_slice(m_grads_tensor, unit);
}

void ReplicatedState::begin_step() { m_zero_pending = true; }

void ReplicatedState::begin_backward(int micro_batch, bool last) {
    m_last_micro_batch = last;
    if (!m_grads) {  // allocated zeroed at first use
        m_zero_pending = false;
        return;
    }
    // With fp32 accumulation the compute-dtype buffer holds one backward at a time; otherwise it accumulates the
    // step and is zeroed once, before the step's first backward.
    if (m_fp32_grad_accum || m_zero_pending) m_be.fill_zero(m_grads_tensor);
    if (m_fp32_grad_accum && m_zero_pending) m_be.fill_zero(m_accum32_tensor);
    m_zero_pending = false;
}

void ReplicatedState::grads_done(int unit) {
    Tensor g = unit_slice(m_grads_tensor, unit);
    if (m_fp32_grad_accum) {
        Tensor acc = unit_slice(m_accum32_tensor, unit);
        m_be.accumulate(acc, g);
        g = acc;
    }
    if (m_sync && m_last_micro_batch) m_sync->unit_ready(unit, g);
}

void ReplicatedState::finish_gradients() {
    ensure_grads();
    if (m_sync) m_sync->wait_all();
}

void ReplicatedState::sync_tied_embedding(Communicator& group) {
    US_FLIGHT_FRAME("ReplicatedState::sync_tied_embedding", FrameDetail::none);
    const int emb = m_layout.embedding_unit();
    if (emb >= 0 && group.size() > 1) group.all_reduce(unit_slice(grads_for_optimizer(), emb));
}

double ReplicatedState::local_grad_sumsq(bool include_embedding, bool include_tp_replicated) {
    if (!m_norm_owner) return 0.0;
    const Tensor g = grads_for_optimizer();
    const int emb = m_layout.embedding_unit();
    const bool tp_replicated_excluded = !include_tp_replicated && m_layout.tp().tp > 1;
    if ((include_embedding || emb < 0) && !tp_replicated_excluded) return m_be.sum_squares(g);
    double total = 0;
    if (!tp_replicated_excluded) {
        for (int u = 0; u < int(m_layout.units().size()); ++u)
            if (u != emb) total += m_be.sum_squares(unit_slice(g, u));
        return total;
    }
    for (const ParamTensor& t : m_layout.tensors())
        if (t.split != TpSplit::replicated && (include_embedding || t.unit != emb))
            total += m_be.sum_squares(g.slice(t.offset, t.numel));
    return total;
}

std::vector<Tensor> ReplicatedState::grad_pieces(const ParamTensor& t) {
    return {grads_for_optimizer().slice(t.offset, t.numel)};
}

void ReplicatedState::optimizer_step(double lr, float clip_coef) {
    const Tensor grads = grads_for_optimizer();
    m_adamw->step([&](const ShardPiece&, int64_t offset, int64_t n) { return grads.slice(offset, n); },
                  [&](const ShardPiece&, int64_t offset, int64_t n) { return m_params_tensor.slice(offset, n); }, lr,
                  clip_coef);
}

void ReplicatedState::initialize(const GPTConfig& cfg, uint64_t seed) {
    std::vector<float> values;
    for (const ParamTensor& t : m_layout.tensors()) {
        values.resize(size_t(t.numel));
        init_param_tensor(t, m_layout.tp(), cfg, seed, values.data());
        import_tensor(t, StateSlot::weights, values.data());
    }
}

void ReplicatedState::export_tensor(const ParamTensor& t, StateSlot slot, float* out) {
    switch (slot) {
        case StateSlot::weights:
            if (m_precision == Precision::bf16)
                download_converted(m_be, out, m_adamw->master().slice(t.offset, t.numel));
            else
                download_converted(m_be, out, m_params_tensor.slice(t.offset, t.numel));
            return;
        case StateSlot::exp_avg:
            download_converted(m_be, out, m_adamw->exp_avg().slice(t.offset, t.numel));
            return;
        case StateSlot::exp_avg_sq:
            download_converted(m_be, out, m_adamw->exp_avg_sq().slice(t.offset, t.numel));
            return;
    }
}

// Weights arrive in fp32: they become the master weights (bf16 runs) and, rounded, the parameters.
void ReplicatedState::import_tensor(const ParamTensor& t, StateSlot slot, const float* in) {
    switch (slot) {
        case StateSlot::weights:
            if (m_precision == Precision::bf16) upload_converted(m_be, m_adamw->master().slice(t.offset, t.numel), in);
            upload_converted(m_be, m_params_tensor.slice(t.offset, t.numel), in);
            return;
        case StateSlot::exp_avg:
            m_adamw->allocate_moments();
            upload_converted(m_be, m_adamw->exp_avg().slice(t.offset, t.numel), in);
            return;
        case StateSlot::exp_avg_sq:
            m_adamw->allocate_moments();
            upload_converted(m_be, m_adamw->exp_avg_sq().slice(t.offset, t.numel), in);
            return;
    }
}

}  // namespace us
