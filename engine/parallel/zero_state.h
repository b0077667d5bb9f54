// ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models") over the
// data-parallel group, by bucket (buckets.h): every bucket is split into dp pieces and each rank keeps the
// optimizer's view of its pieces only.
//   stage 1: fp32 master weights and Adam moments sharded; gradients full. On the last micro-batch each bucket's
//            gradients are reduce-scattered as soon as backward finishes it; after the step the updated
//            parameters are all-gathered.
//   stage 2: gradients sharded too: backward writes a bucket's gradients into a temporary buffer (comm_buffers),
//            which is reduce-scattered and freed at every micro-batch (as DeepSpeed does: that is what keeps the
//            full gradients from ever existing).
//   stage 3: parameters sharded too: a bucket's parameters are all-gathered into a temporary buffer before its
//            forward and again before its backward, the next bucket prefetched, and freed after use.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/optim/adamw.h"
#include "engine/parallel/buckets.h"
#include "engine/parallel/train_state.h"

namespace us {

class ZeroState final : public TrainState {
public:
    ZeroState(Backend& backend, const ParamLayout& layout, Precision precision, bool fp32_grad_accum,
              const AdamWConfig& adamw, Communicator& dp, int stage, double bucket_mb, bool isolate_embedding = false);
    ~ZeroState() override;

    void acquire(int unit, Pass pass) override;
    void release(int unit, Pass pass) override;
    Tensor weights(int unit) override;
    Tensor grads(int unit) override;
    void grads_done(int unit) override;

    void initialize(const GPTConfig& cfg, uint64_t seed) override;
    void begin_step() override;
    void begin_backward(int micro_batch, bool last) override;
    void finish_gradients() override;
    void sync_tied_embedding(Communicator& group) override;
    double local_grad_sumsq(bool include_embedding, bool include_tp_replicated) override;
    std::vector<Tensor> grad_pieces(const ParamTensor& t) override;
    bool sharded() const override { return true; }
    void optimizer_step(double lr, float clip_coef) override;
    int optimizer_steps_taken() const override { return m_adamw->step_count(); }
    bool has_optimizer_moments() const override { return m_adamw->has_moments(); }
    // Collective over the dp group: every rank must call it for the same tensors in the same order.
    void export_tensor(const ParamTensor& t, StateSlot slot, float* out) override;
    void import_tensor(const ParamTensor& t, StateSlot slot, const float* in) override;
    void set_optimizer_steps(int steps) override { m_adamw->set_step_count(steps); }

    int64_t shard_numel() const { return m_shard_numel; }
    const BucketPlan& plan() const { return m_plan; }

private:
    struct Reduction {
        int bucket;
        CommHandle handle;
        Allocation recv;
    };
    struct Gathered {
        Allocation buffer;
        CommHandle handle;
        int users = 0;
    };

    const Bucket& bucket_of(int unit) const { return m_plan.buckets[size_t(m_plan.bucket_of_unit[size_t(unit)])]; }
    int64_t my_piece_begin(int b) const {
        return m_plan.buckets[size_t(b)].offset + m_split[size_t(b)].displs[size_t(m_me)];
    }
    int my_piece_count(int b) const { return m_split[size_t(b)].counts[size_t(m_me)]; }
    void ensure_grads();
    void launch_reduce_scatter(int b);
    void drain(bool block);
    void drain_one();
    void start_gather(int b);
    template <typename Fn>
    void for_each_piece(const ParamTensor& t, int rank, Fn&& fn) const;  // fn(global_begin, count, shard_offset)

    Backend& m_be;
    const ParamLayout& m_layout;
    Precision m_precision;
    DType m_e;
    bool m_fp32_accum;
    Communicator& m_dp;
    int m_stage;
    int m_me;
    BucketPlan m_plan;
    std::vector<ShardSplit> m_split;
    std::vector<int64_t> m_shard_offset;  // per bucket, where its piece sits in the shard buffers
    int64_t m_shard_numel = 0;

    Allocation m_params;  // stage <= 2: full (compute dtype); stage 3: this rank's shard
    Tensor m_params_t;
    Allocation m_grads, m_accum32;  // stage 1: full; stages 2-3: shard
    Tensor m_grads_t, m_accum32_t;
    std::vector<Allocation> m_bucket_grads;  // stages 2-3: this micro-batch's full bucket gradients
    std::vector<int> m_units_left;
    std::vector<bool> m_bucket_busy;  // a reduce-scatter still reads the bucket's gradients
    std::deque<Reduction> m_inflight;
    std::vector<Gathered> m_gathered;  // stage 3
    std::unique_ptr<AdamW> m_adamw;
    bool m_last_micro_batch = true;
    bool m_zero_pending = false;
    bool m_step_begun = false;  // per-bucket unit counters reset at the first backward of the step
};

}  // namespace us
