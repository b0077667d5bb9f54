// The AdamW optimizer over one rank's share of the parameters: all of them without ZeRO, its shard with it.
// Owns the fp32 master weights (bf16 runs) and the two fp32 moments; the moments are allocated at the first step,
// as PyTorch does, so that step 1's memory differs from step 2's.
#pragma once

#include <vector>

#include "engine/backend/backend.h"
#include "common/settings/gpt_config.h"
#include "engine/model/param_layout.h"
#include "common/settings/adamw_config.h"

namespace us {

// A contiguous run of the flat layout that this rank updates, and where it sits in the rank's shard storage.
struct ShardPiece {
    int64_t global_offset = 0;  // in the model's flat layout
    int64_t shard_offset = 0;   // in this rank's shard buffers (master, moments, sharded grads)
    int64_t numel = 0;
};

class AdamW {
public:
    // pieces: the ranges of `layout` this rank updates; shard_numel: size of the shard buffers (pieces plus any
    // padding). Master weights exist only in bf16 runs.
    AdamW(Backend& backend, const ParamLayout& layout, std::vector<ShardPiece> pieces, int64_t shard_numel,
          Precision precision, const AdamWConfig& config);

    Tensor master() const { return m_master_tensor; }  // (shard_numel) fp32, empty in fp32 runs
    Tensor exp_avg() const { return m_m; }
    Tensor exp_avg_sq() const { return m_v; }
    bool has_moments() const { return bool(m_moments); }
    int step_count() const { return m_step; }
    const std::vector<ShardPiece>& pieces() const { return m_pieces; }
    void allocate_moments();  // at the first step, or when a checkpoint restores them
    void set_step_count(int step) { m_step = step; }

    // One step. `grads_at(piece, global_offset, n)` and `params_at(...)` return the gradient (fp32 or compute
    // dtype) and parameter ranges of a piece, wherever the state keeps them (a full buffer or a shard).
    template <typename GradsAt, typename ParamsAt>
    void step(GradsAt&& grads_at, ParamsAt&& params_at, double lr, float clip_coef);

private:
    void update_range(Tensor params, Tensor grads, int64_t shard_offset, int64_t n, bool decay, double lr,
                      float clip_coef);

    Backend& m_be;
    const ParamLayout& m_layout;
    std::vector<ShardPiece> m_pieces;
    int64_t m_shard_numel;
    Precision m_precision;
    AdamWConfig m_config;
    Allocation m_master;
    Tensor m_master_tensor;
    Allocation m_moments;
    Tensor m_m, m_v;
    int m_step = 0;
};

template <typename GradsAt, typename ParamsAt>
void AdamW::step(GradsAt&& grads_at, ParamsAt&& params_at, double lr, float clip_coef) {
    if (!m_moments) allocate_moments();
    ++m_step;
    // Within each piece, walk the tensors it overlaps: weight decay applies per tensor. Neighbouring tensors with
    // the same decay are one update (AdamW is elementwise, so the result is the same; on a GPU it is one launch
    // instead of one per tensor).
    for (const ShardPiece& piece : m_pieces) {
        const int64_t lo = piece.global_offset, hi = lo + piece.numel;
        int64_t run_a = 0, run_b = 0;
        bool run_decay = false;
        auto flush = [&] {
            if (run_b <= run_a) return;
            update_range(params_at(piece, run_a, run_b - run_a), grads_at(piece, run_a, run_b - run_a),
                         piece.shard_offset + (run_a - lo), run_b - run_a, run_decay, lr, clip_coef);
        };
        for (const ParamTensor& t : m_layout.tensors()) {
            const int64_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.numel);
            if (a >= b) continue;
            if (a == run_b && t.decay == run_decay && run_b > run_a) {
                run_b = b;
                continue;
            }
            flush();
            run_a = a, run_b = b, run_decay = t.decay;
        }
        flush();
    }
}

}  // namespace us
