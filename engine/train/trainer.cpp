#include "engine/train/trainer.h"

#include <chrono>
#include <cmath>

#include "engine/optim/grad_clip.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/replicated_state.h"
#include "engine/parallel/zero_state.h"
#include "engine/train/checkpoint.h"
#include "profiler/record/zones.h"

namespace us {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

namespace {
ProcessGrid& grid_or_local(ProcessGrid* grid, std::unique_ptr<ProcessGrid>& own, const ParallelConfig& p) {
    if (grid) return *grid;
    validate_layout(p, 1);
    own = std::make_unique<ProcessGrid>(p, make_local_communicator(GroupKind::world));
    return *own;
}
}  // namespace

Trainer::Trainer(const TrainConfig& config, Backend& backend, ProcessGrid* grid)
    : m_config((config.validate(), config)), m_be(backend),
      m_grid(grid_or_local(grid, m_own_grid, config.parallel)),
      m_layout(ParamLayout::whole_model(config.model)) {
    const ParallelConfig& p = m_config.parallel;
    validate_layout(p, m_grid.world_size());

    m_data = TokenDataset::from_file(m_config.data.empty() ? default_corpus_path() : m_config.data);
    DataLayout dl;
    dl.seq = m_config.model.seq;
    dl.micro_batch = m_config.batch;
    dl.micro_batches = m_config.grad_accum;
    dl.dp_size = m_grid.dp_size();
    dl.dp_rank = m_grid.dp_rank();

    // Composition: ZeRO-0 replicates everything and all-reduces gradient buckets; ZeRO-1..3 shard by bucket.
    if (p.zero == 0) {
        const bool fp32_accum = m_config.fp32_grad_accum && m_config.precision == Precision::bf16;
        if (m_grid.dp_size() > 1)
            m_sync = std::make_unique<DataParallelSync>(m_grid.dp_group(), m_layout, p.bucket_mb,
                                                        fp32_accum ? 4 : dtype_size(compute_dtype(m_config.precision)),
                                                        p.overlap);
        m_state = std::make_unique<ReplicatedState>(backend, m_layout, m_config.precision, m_config.fp32_grad_accum,
                                                    m_config.adamw, m_sync.get());
    } else {
        m_state = std::make_unique<ZeroState>(backend, m_layout, m_config.precision, m_config.fp32_grad_accum,
                                              m_config.adamw, m_grid.dp_group(), p.zero, p.bucket_mb);
    }
    ModelOptions mo;
    mo.precision = m_config.precision;
    mo.recompute = m_config.recompute;
    mo.micro_batch = m_config.batch;
    m_model = std::make_unique<GPT>(m_config.model, mo, backend, m_layout);

    if (!m_config.load.empty()) {
        const CheckpointInfo info = load_checkpoint(m_config.load, m_config, m_layout, *m_state);
        m_steps_done = info.steps_done;
        if (info.seed != 0) m_config.seed = info.seed;  // the data order continues where the checkpoint left it
    } else {
        m_state->initialize(m_config.model, m_config.seed);
    }
    m_loader = std::make_unique<DataLoader>(m_data, dl, m_config.seed);

    m_schedule.lr = m_config.adamw.lr;
    m_schedule.min_lr = m_config.adamw.lr * m_config.min_lr_ratio;
    m_schedule.warmup = m_config.warmup;
    m_schedule.total = std::max(m_config.steps, 1);
    const size_t n = size_t(m_config.batch) * size_t(m_config.model.seq);
    m_tokens.resize(n);
    m_targets.resize(n);
}

Trainer::~Trainer() = default;

StepMetrics Trainer::train_step() {
    const auto t0 = std::chrono::steady_clock::now();
    const int step = m_steps_done + 1;
    US_PROF_STEP(step);
    m_be.allocator().reset_peaks();
    const int M = m_config.grad_accum, dp = m_config.parallel.dp;
    const float grad_scale = 1.0f / float(M * dp);
    double loss_sum = 0.0, norm = 0.0, lr = 0.0;
    {
        US_PROF_ZONE(prof::Lane::host, prof::SpanKind::step, prof::OpClass::none, US_PROF_NAME("step"));
        for (int mb = 0; mb < M; ++mb) {
            const bool last = mb == M - 1;
            m_state->begin_micro_batch(mb, last);
            m_loader->fill(m_steps_done, mb, m_tokens.data(), m_targets.data());
            ChunkActivations acts;
            acts.micro_batch_index = mb;
            {
                US_PROF_PHASE(prof::Phase::forward, mb);
                US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("forward"));
                m_model->forward(acts, MicroBatch{m_tokens.data(), m_targets.data()}, Tensor{}, *m_state);
            }
            loss_sum += acts.loss_sum;
            {
                US_PROF_PHASE(prof::Phase::backward, mb);
                US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("backward"));
                m_model->backward(acts, Tensor{}, Tensor{}, grad_scale, *m_state);
                m_state->end_micro_batch(mb, last);
            }
        }
        US_PROF_PHASE(prof::Phase::optimizer, -1);
        US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("optimizer"));
        norm = std::sqrt(m_state->finish_gradients());
        const float clip = clip_coefficient(norm, m_config.grad_clip);
        lr = m_schedule.at(step);
        m_state->optimizer_step(lr, clip);
        m_be.synchronize();
    }
    m_steps_done = step;
    // The loss of the global batch: every dp rank's share of the token losses, summed.
    loss_sum = m_grid.dp_group().all_reduce_sum(loss_sum);

    StepMetrics r;
    r.step = step;
    r.tokens = m_config.tokens_per_step();
    r.loss = loss_sum / double(int64_t(M) * dp * m_config.batch * m_config.model.seq);
    r.lr = lr;
    r.grad_norm = norm;
    r.step_ms = seconds_since(t0) * 1e3;
    r.tokens_per_s = double(r.tokens) / (r.step_ms / 1e3);
    r.memory = m_be.allocator().stats();
    if (prof::enabled()) {
        prof::record_counter(US_PROF_NAME("loss"), r.loss);
        prof::record_counter(US_PROF_NAME("lr"), r.lr);
        prof::record_counter(US_PROF_NAME("grad_norm"), r.grad_norm);
        prof::record_counter(US_PROF_NAME("tokens_per_s"), r.tokens_per_s);
        prof::record_counter(US_PROF_NAME("step_ms"), r.step_ms);
    }
    return r;
}

void Trainer::save(const std::string& path) {
    // Every rank takes part (sharded states gather their pieces); rank 0 writes.
    save_checkpoint(path, m_config, m_layout, *m_state, m_steps_done, m_grid.world_rank() == 0);
    m_grid.world().barrier();
}

double Trainer::evaluate_loss(const int32_t* tokens, const int32_t* targets) {
    ChunkActivations acts;
    m_model->forward(acts, MicroBatch{tokens, targets}, Tensor{}, *m_state);
    return acts.loss_sum / double(int64_t(m_config.batch) * m_config.model.seq);
}

}  // namespace us
