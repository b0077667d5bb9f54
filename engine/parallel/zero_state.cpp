#include "engine/parallel/zero_state.h"
#include "engine/comm/flight_frames.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/model/init.h"
#include "engine/parallel/replicated_state.h"

namespace us {

ZeroState::ZeroState(Backend& backend, const ParamLayout& layout, Precision precision, bool fp32_grad_accum,
                     const AdamWConfig& adamw, Communicator& dp, int stage, double bucket_mb, bool isolate_embedding)
    : m_be(backend),
      m_layout(layout),
      m_precision(precision),
      m_e(compute_dtype(precision)),
      m_fp32_accum(fp32_grad_accum && precision == Precision::bf16),
      m_dp(dp),
      m_stage(stage),
      m_me(dp.rank()),
      m_plan(plan_buckets(layout, bucket_mb, dtype_size(m_e), isolate_embedding)) {
    US_ASSERT(stage >= 1 && stage <= 3, "ZeRO stage {}", stage);
    std::vector<ShardPiece> pieces;
    for (int b = 0; b < int(m_plan.buckets.size()); ++b) {
        m_split.push_back(split_evenly(m_plan.buckets[size_t(b)].numel, dp.size()));
        m_shard_offset.push_back(m_shard_numel);
        if (my_piece_count(b) > 0) pieces.push_back({my_piece_begin(b), m_shard_numel, my_piece_count(b)});
        m_shard_numel += m_split.back().piece;
    }
    m_units_left.resize(m_plan.buckets.size());
    m_bucket_busy.assign(m_plan.buckets.size(), false);
    m_bucket_grads.resize(m_plan.buckets.size());
    m_gathered.resize(m_plan.buckets.size());
    const int64_t n = stage >= 3 ? m_shard_numel : layout.total();
    m_params = backend.allocator().allocate(size_t(n) * dtype_size(m_e), MemCategory::params,
                                            stage >= 3 ? "parameters (ZeRO-3 shard)" : "parameters");
    m_params_t = m_params.view(m_e, 0, n);
    m_be.fill_zero(m_params_t);
    m_adamw = std::make_unique<AdamW>(backend, layout, std::move(pieces), m_shard_numel, precision, adamw);
}

ZeroState::~ZeroState() {
    for (auto& r : m_inflight) r.handle->wait();
    for (auto& g : m_gathered)
        if (g.handle) g.handle->wait();
}

// ---- parameters

void ZeroState::start_gather(int b) {
    US_FLIGHT_FRAME("ZeroState::gather_parameters", FrameDetail::none);
    Gathered& g = m_gathered[size_t(b)];
    if (g.buffer) return;
    const Bucket& bucket = m_plan.buckets[size_t(b)];
    g.buffer = m_be.allocator().allocate(size_t(bucket.numel) * dtype_size(m_e), MemCategory::comm_buffers,
                                         "ZeRO-3 gathered parameters");
    const Tensor full = g.buffer.view(m_e, 0, bucket.numel);
    const ShardSplit& s = m_split[size_t(b)];
    if (my_piece_count(b) > 0)
        m_be.copy(full.slice(s.displs[size_t(m_me)], my_piece_count(b)),
                  m_params_t.slice(m_shard_offset[size_t(b)], my_piece_count(b)));
    g.handle = m_dp.iall_gather(full, s.counts, s.displs);
}

void ZeroState::acquire(int unit, Pass pass) {
    if (m_stage < 3) return;
    const int b = m_plan.bucket_of_unit[size_t(unit)];
    start_gather(b);
    Gathered& g = m_gathered[size_t(b)];
    ++g.users;
    // Prefetch the bucket the pass needs next while this one computes (blocks only: the head's use of the
    // embedding at the end of forward needs no next bucket).
    if (m_layout.units()[size_t(unit)].kind == UnitKind::block) {
        const int next = pass == Pass::forward ? b + 1 : b - 1;
        if (next >= 0 && next < int(m_plan.buckets.size())) start_gather(next);
    }
    g.handle->wait();
}

void ZeroState::release(int unit, Pass) {
    if (m_stage < 3) return;
    Gathered& g = m_gathered[size_t(m_plan.bucket_of_unit[size_t(unit)])];
    if (--g.users == 0) {
        g.handle->wait();
        g.handle.reset();
        g.buffer.reset();
    }
}

Tensor ZeroState::weights(int unit) {
    const ParamUnit& u = m_layout.units()[size_t(unit)];
    if (m_stage < 3) return m_params_t.slice(u.offset, u.numel);
    const Bucket& bucket = bucket_of(unit);
    const Gathered& g = m_gathered[size_t(m_plan.bucket_of_unit[size_t(unit)])];
    US_ASSERT(g.buffer && g.users > 0, "ZeRO-3 unit {} used without acquire", unit);
    return g.buffer.view(m_e, u.offset - bucket.offset, u.numel);
}

// ---- gradients

void ZeroState::ensure_grads() {
    if (m_grads) return;
    const int64_t n = m_stage >= 2 ? m_shard_numel : m_layout.total();
    const char* what = m_stage >= 2 ? "gradients (ZeRO shard)" : "gradients";
    m_grads = m_be.allocator().allocate(size_t(n) * dtype_size(m_e), MemCategory::grads, what);
    m_grads_t = m_grads.view(m_e, 0, n);
    m_be.fill_zero(m_grads_t);
    if (m_fp32_accum) {
        m_accum32 = m_be.allocator().allocate(size_t(n) * 4, MemCategory::grads, "fp32 gradient accumulation");
        m_accum32_t = m_accum32.view(DType::f32, 0, n);
        m_be.fill_zero(m_accum32_t);
    }
}

Tensor ZeroState::grads(int unit) {
    ensure_grads();
    const ParamUnit& u = m_layout.units()[size_t(unit)];
    if (m_stage == 1) return m_grads_t.slice(u.offset, u.numel);
    const int b = m_plan.bucket_of_unit[size_t(unit)];
    const Bucket& bucket = m_plan.buckets[size_t(b)];
    // The previous micro-batch's reduction of this bucket may still be reading its buffer: finish it first.
    while (m_bucket_busy[size_t(b)]) drain_one();
    Allocation& buf = m_bucket_grads[size_t(b)];
    if (!buf) {
        buf = m_be.allocator().allocate(size_t(bucket.numel) * dtype_size(m_e), MemCategory::comm_buffers,
                                        "ZeRO gradient bucket");
        m_be.fill_zero(buf.view(m_e, 0, bucket.numel));
    }
    return buf.view(m_e, u.offset - bucket.offset, u.numel);
}

void ZeroState::begin_step() {
    m_zero_pending = true;
    // Stage 1 counts a bucket's units over the whole step (its reduction waits for the last micro-batch);
    // stages 2-3 count them per backward.
    for (size_t b = 0; b < m_plan.buckets.size(); ++b)
        m_units_left[b] = m_plan.buckets[b].last_unit - m_plan.buckets[b].first_unit + 1;
}

void ZeroState::begin_backward(int micro_batch, bool last) {
    m_last_micro_batch = last;
    if (m_stage >= 2)
        for (size_t b = 0; b < m_plan.buckets.size(); ++b)
            m_units_left[b] = m_plan.buckets[b].last_unit - m_plan.buckets[b].first_unit + 1;
    if (!m_grads) {  // allocated zeroed at first use
        m_zero_pending = false;
        return;
    }
    if (m_stage == 1) {
        // as in the replicated state: the compute-dtype buffer holds one backward with fp32 accumulation
        if (m_fp32_accum || m_zero_pending) m_be.fill_zero(m_grads_t);
        if (m_fp32_accum && m_zero_pending) m_be.fill_zero(m_accum32_t);
    } else if (m_zero_pending) {
        drain(true);  // nothing from the previous step may land after the zeroing
        m_be.fill_zero(m_grads_t);
        if (m_fp32_accum) m_be.fill_zero(m_accum32_t);
    }
    m_zero_pending = false;
}

void ZeroState::grads_done(int unit) {
    const int b = m_plan.bucket_of_unit[size_t(unit)];
    if (m_stage == 1 && m_fp32_accum) {
        const ParamUnit& u = m_layout.units()[size_t(unit)];
        m_be.accumulate(m_accum32_t.slice(u.offset, u.numel), m_grads_t.slice(u.offset, u.numel));
    }
    if (m_stage >= 2 || m_last_micro_batch)
        if (--m_units_left[size_t(b)] == 0) launch_reduce_scatter(b);
    drain(false);
}

// Stage 1 reduces the full gradient buffer; stages 2-3 the bucket's temporary buffer. Either way this rank's
// piece of the sum lands in a temporary and is placed (stage 1) or accumulated (stages 2-3) on completion.
void ZeroState::launch_reduce_scatter(int b) {
    US_FLIGHT_FRAME("ZeroState::reduce_scatter_gradients", FrameDetail::none);
    const Bucket& bucket = m_plan.buckets[size_t(b)];
    const ShardSplit& s = m_split[size_t(b)];
    const DType t = m_stage == 1 && m_fp32_accum ? DType::f32 : m_e;
    Tensor send;
    if (m_stage == 1)
        send = (m_fp32_accum ? m_accum32_t : m_grads_t).slice(bucket.offset, bucket.numel);
    else
        send = m_bucket_grads[size_t(b)].view(m_e, 0, bucket.numel);
    Reduction r;
    r.bucket = b;
    r.recv = m_be.allocator().allocate(size_t(std::max(1, my_piece_count(b))) * dtype_size(t),
                                       MemCategory::comm_buffers, "ZeRO reduce-scatter piece");
    r.handle = m_dp.ireduce_scatter(send, r.recv.view(t, 0, my_piece_count(b)), s.counts, s.displs);
    m_bucket_busy[size_t(b)] = true;
    m_inflight.push_back(std::move(r));
}

void ZeroState::drain(bool block) {
    while (!m_inflight.empty()) {
        if (!block && !m_inflight.front().handle->test()) return;
        drain_one();
    }
}

// Completes the oldest reduction (waiting if needed) and puts its piece where the optimizer reads it.
void ZeroState::drain_one() {
    {
        Reduction& r = m_inflight.front();
        r.handle->wait();
        const int b = r.bucket, n = my_piece_count(b);
        if (n > 0) {
            if (m_stage == 1) {
                Tensor dst = (m_fp32_accum ? m_accum32_t : m_grads_t).slice(my_piece_begin(b), n);
                m_be.copy(dst, r.recv.view(dst.dtype, 0, n));
            } else {
                const Tensor piece = r.recv.view(m_e, 0, n);
                const int64_t at = m_shard_offset[size_t(b)];
                if (m_fp32_accum) {
                    m_be.copy(m_grads_t.slice(at, n), piece);
                    m_be.accumulate(m_accum32_t.slice(at, n), m_grads_t.slice(at, n));
                } else {
                    m_be.accumulate(m_grads_t.slice(at, n), piece);
                }
            }
        }
        if (m_stage >= 2) m_bucket_grads[size_t(b)].reset();
        m_bucket_busy[size_t(b)] = false;
        m_inflight.pop_front();
    }
}

void ZeroState::finish_gradients() {
    drain(true);
    ensure_grads();
}

// The embedding is a bucket of its own under pipeline parallelism (buckets.h), so both stages split it alike and
// summing the pieces in place is summing the tied gradient.
void ZeroState::sync_tied_embedding(Communicator& group) {
    US_FLIGHT_FRAME("ZeroState::sync_tied_embedding", FrameDetail::none);
    const int emb = m_layout.embedding_unit();
    if (emb < 0 || group.size() == 1) return;
    const int b = m_plan.bucket_of_unit[size_t(emb)];
    const int n = my_piece_count(b);
    if (n == 0) return;
    const Tensor g = m_fp32_accum ? m_accum32_t : m_grads_t;
    group.all_reduce(g.slice(m_stage == 1 ? my_piece_begin(b) : m_shard_offset[size_t(b)], n));
}

double ZeroState::local_grad_sumsq(bool include_embedding, bool include_tp_replicated) {
    double local = 0;
    const Tensor g = m_fp32_accum ? m_accum32_t : m_grads_t;
    if (!include_tp_replicated && m_layout.tp().tp > 1) {  // tensor by tensor, the tp-sharded ones only
        for (const ParamTensor& t : m_layout.tensors())
            if (t.split != TpSplit::replicated && (include_embedding || t.unit != m_layout.embedding_unit()))
                for (const Tensor& piece : grad_pieces(t)) local += m_be.sum_squares(piece);
        return local;
    }
    const int emb_bucket =
        m_layout.embedding_unit() >= 0 ? m_plan.bucket_of_unit[size_t(m_layout.embedding_unit())] : -1;
    for (int b = 0; b < int(m_plan.buckets.size()); ++b) {
        const int n = my_piece_count(b);
        if (n == 0 || (!include_embedding && b == emb_bucket)) continue;
        local += m_be.sum_squares(g.slice(m_stage == 1 ? my_piece_begin(b) : m_shard_offset[size_t(b)], n));
    }
    return local;
}

std::vector<Tensor> ZeroState::grad_pieces(const ParamTensor& t) {
    const Tensor g = m_fp32_accum ? m_accum32_t : m_grads_t;
    std::vector<Tensor> pieces;
    for_each_piece(t, m_me, [&](int64_t global, int64_t n, int64_t at) {
        pieces.push_back(g.slice(m_stage == 1 ? global : at, n));
    });
    return pieces;
}

void ZeroState::optimizer_step(double lr, float clip_coef) {
    US_FLIGHT_FRAME("ZeroState::optimizer_step (gather updated parameters)", FrameDetail::none);
    const Tensor g = m_fp32_accum ? m_accum32_t : m_grads_t;
    auto shard_at = [](const ShardPiece& p, int64_t global, int64_t n, Tensor shard) {
        return shard.slice(p.shard_offset + (global - p.global_offset), n);
    };
    m_adamw->step(
        [&](const ShardPiece& p, int64_t a, int64_t n) { return m_stage == 1 ? g.slice(a, n) : shard_at(p, a, n, g); },
        [&](const ShardPiece& p, int64_t a, int64_t n) {
            return m_stage >= 3 ? shard_at(p, a, n, m_params_t) : m_params_t.slice(a, n);
        },
        lr, clip_coef);
    if (m_stage >= 3) {
        // A prefetched bucket nobody used holds parameters from before this step: drop it.
        for (auto& g : m_gathered)
            if (g.buffer && g.users == 0) {
                g.handle->wait();
                g.handle.reset();
                g.buffer.reset();
            }
        return;  // the next forward gathers what it needs
    }
    std::vector<CommHandle> handles;
    for (int b = 0; b < int(m_plan.buckets.size()); ++b) {
        const Bucket& bucket = m_plan.buckets[size_t(b)];
        handles.push_back(m_dp.iall_gather(m_params_t.slice(bucket.offset, bucket.numel), m_split[size_t(b)].counts,
                                           m_split[size_t(b)].displs));
    }
    for (auto& h : handles) h->wait();
}

// ---- state in and out

template <typename Fn>
void ZeroState::for_each_piece(const ParamTensor& t, int rank, Fn&& fn) const {
    for (int b = 0; b < int(m_plan.buckets.size()); ++b) {
        const ShardSplit& s = m_split[size_t(b)];
        const int64_t lo = m_plan.buckets[size_t(b)].offset + s.displs[size_t(rank)], hi = lo + s.counts[size_t(rank)];
        const int64_t a = std::max(lo, t.offset), e = std::min(hi, t.offset + t.numel);
        if (a < e) fn(a, e - a, m_shard_offset[size_t(b)] + (a - lo));
    }
}

void ZeroState::initialize(const GPTConfig& cfg, uint64_t seed) {
    std::vector<float> values;
    for (const ParamTensor& t : m_layout.tensors()) {
        values.resize(size_t(t.numel));
        init_param_tensor(t, m_layout.tp(), cfg, seed, values.data());
        import_tensor(t, StateSlot::weights, values.data());
    }
}

void ZeroState::import_tensor(const ParamTensor& t, StateSlot slot, const float* in) {
    if (slot == StateSlot::weights && m_stage < 3) upload_converted(m_be, m_params_t.slice(t.offset, t.numel), in);
    if (slot != StateSlot::weights) m_adamw->allocate_moments();
    for_each_piece(t, m_me, [&](int64_t a, int64_t n, int64_t at) {
        const float* src = in + (a - t.offset);
        switch (slot) {
            case StateSlot::weights:
                if (m_stage >= 3) upload_converted(m_be, m_params_t.slice(at, n), src);
                if (m_precision == Precision::bf16) upload_converted(m_be, m_adamw->master().slice(at, n), src);
                break;
            case StateSlot::exp_avg:
                upload_converted(m_be, m_adamw->exp_avg().slice(at, n), src);
                break;
            case StateSlot::exp_avg_sq:
                upload_converted(m_be, m_adamw->exp_avg_sq().slice(at, n), src);
                break;
        }
    });
}

void ZeroState::export_tensor(const ParamTensor& t, StateSlot slot, float* out) {
    // Every rank fills its pieces, then all pieces are exchanged and each element is taken from its owner.
    std::vector<float> mine(size_t(t.numel), 0.0f), all(size_t(t.numel) * size_t(m_dp.size()));
    for_each_piece(t, m_me, [&](int64_t a, int64_t n, int64_t at) {
        float* dst = mine.data() + (a - t.offset);
        Tensor src;
        switch (slot) {
            case StateSlot::weights:
                src = m_precision == Precision::bf16
                          ? m_adamw->master().slice(at, n)
                          : (m_stage >= 3 ? m_params_t.slice(at, n) : m_params_t.slice(a, n));
                break;
            case StateSlot::exp_avg:
                src = m_adamw->exp_avg().slice(at, n);
                break;
            case StateSlot::exp_avg_sq:
                src = m_adamw->exp_avg_sq().slice(at, n);
                break;
        }
        download_converted(m_be, dst, src);
    });
    m_dp.all_gather_bytes(mine.data(), mine.size() * sizeof(float), all.data());
    for (int r = 0; r < m_dp.size(); ++r)
        for_each_piece(t, r, [&](int64_t a, int64_t n, int64_t) {
            std::copy_n(all.data() + size_t(r) * size_t(t.numel) + (a - t.offset), n, out + (a - t.offset));
        });
}

}  // namespace us
