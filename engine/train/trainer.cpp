#include "engine/train/trainer.h"

#include <chrono>
#include <fmt/format.h>
#include <cmath>

#include "engine/comm/flight_frames.h"
#include "engine/optim/grad_clip.h"
#include "engine/parallel/data_parallel.h"
#include "engine/backend/memory_sample.h"
#include "engine/parallel/expert_parallel.h"
#include "engine/parallel/expert_state.h"
#include "engine/parallel/replicated_state.h"
#include "engine/parallel/sp_replicated_grads.h"
#include "engine/parallel/zero_state.h"
#include "engine/train/checkpoint.h"
#include "engine/train/core_wait.h"
#include "profiler/record/zones.h"

namespace us {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

namespace {
ProcessGrid& grid_or_local(ProcessGrid* grid, std::unique_ptr<ProcessGrid>& own, const ParallelLayout& p) {
    if (grid) return *grid;
    p.check_world(1);
    own = std::make_unique<ProcessGrid>(p, make_local_communicator(GroupKind::world));
    return *own;
}
}  // namespace

std::vector<std::pair<int, int>> Trainer::stage_chunks(const TrainConfig& cfg, int stage) {
    const int pp = cfg.parallel.pp, V = cfg.parallel.pp_chunks, S = pp * V;
    const int per = cfg.model.layers / S;
    std::vector<std::pair<int, int>> ranges;
    for (int c = 0; c < V; ++c) {
        const int vs = c * pp + stage;
        ranges.emplace_back(vs * per, (vs + 1) * per);
    }
    return ranges;
}

ParamLayout Trainer::rank_layout(const TrainConfig& cfg, int stage, int tp_rank) {
    return ParamLayout::build(cfg.model, stage_chunks(cfg, stage), TpPlacement{cfg.parallel.tp, tp_rank});
}

// The parallelisms, applied in one fixed order from the innermost (picotron and torchtitan compose the same way):
//   1. tensor parallelism (and sequence parallelism): every layer split over the tp group; the rank holds its
//      shard of each tensor and the model calls the tp group's mappings;
//   2. context parallelism: the rank sees its positions of each sequence, and attention becomes the ring's;
//   3. expert parallelism: an MoE block's experts spread over the ep ranks carved out of dp, the token rows
//      exchanged by all-to-all;
//   4. pipeline parallelism: the rank runs its stage's chunks of blocks (with the embedding on the first stage,
//      the head on the last) on the schedule's order;
//   5. data parallelism and ZeRO, outermost: the blocks' gradients reduced over the dp x cp group (context-parallel
//      ranks hold partial gradients of the same parameters), the experts' over the ranks holding the same experts;
//      optimizer state (and with ZeRO-2/3 gradients and parameters) sharded over those groups.
Trainer::Trainer(const TrainConfig& config, Backend& backend, ProcessGrid* grid)
    : m_config((config.validate(), config)), m_be(backend), m_grid(grid_or_local(grid, m_own_grid, config.parallel)) {
    const ParallelLayout& p = m_config.parallel;
    p.check_world(m_grid.world_size());
    if (p.tp > 1) m_tp = TensorParallel(m_grid.tp_group(), p.sp, backend);  // 1
    if (p.cp > 1)                                                           // 2
        m_cp = ContextParallel(m_grid.cp_group(), p.cp_balance, p.cp_comm, m_config.model.seq, backend);
    m_layout = rank_layout(m_config, m_grid.pp_rank(), m_grid.tp_rank());  // 1 + 4
    if (m_config.model.is_moe()) {                                         // 3
        m_expert_layout =
            ParamLayout::build_experts(m_config.model, stage_chunks(m_config, m_grid.pp_rank()),
                                       TpPlacement{p.tp, m_grid.tp_rank()}, EpPlacement{p.ep, m_grid.ep_rank()});
        if (p.ep > 1)
            m_expert_exchange = std::make_unique<ExpertParallel>(m_grid.ep_group(), m_config.model.moe_experts);
    }
    m_hang = InjectedHang(m_config, m_grid.world_rank());
    make_state();   // 5
    make_chunks();  // 1 - 4

    // Data: every rank of a data-parallel replica (its tp, cp ranks and pipeline stages) reads the same
    // micro-batches; a cp rank keeps its positions of them.
    m_data = TokenDataset::from_file(m_config.data.empty() ? default_corpus_path() : m_config.data);
    DataLayout dl;
    dl.seq = m_config.model.seq;
    dl.micro_batch = m_config.batch;
    dl.micro_batches = m_config.grad_accum;
    dl.dp_size = m_grid.dp_size();
    dl.dp_rank = m_grid.dp_rank();

    if (!m_config.load.empty()) {
        const CheckpointInfo info = load_checkpoint(m_config.load, m_config, {&m_layout, &m_expert_layout}, *m_state);
        m_steps_done = info.steps_done;
        if (info.seed != 0) m_config.seed = info.seed;  // the data order continues where the checkpoint left it
    } else {
        m_state->initialize(m_config.model, m_config.seed);
    }
    m_loader = std::make_unique<DataLoader>(m_data, dl, m_config.seed);
    BatchSource* batches = m_loader.get();
    if (m_cp.active()) {
        m_local_batches = std::make_unique<LocalSequenceBatches>(*m_loader, m_cp, m_config.batch, m_config.model.seq);
        batches = m_local_batches.get();
    }

    const PipelineShape shape{p.pp, m_config.grad_accum, p.pp_chunks};
    Schedule schedule = make_schedule(p.pp_schedule, shape);
    const int local_seq = m_cp.active() ? m_cp.local_seq() : m_config.model.seq;
    m_executor = std::make_unique<PipelineExecutor>(m_grid, shape, schedule[size_t(m_grid.pp_rank())], m_chunks,
                                                    *m_state, backend, *batches, m_config.batch, local_seq);
    if (m_config.slow_rank == m_grid.world_rank() && m_config.slow_factor > 1.0) {  // an injected straggler
        if (m_config.slow_kind == "load")
            m_load = std::make_unique<InjectedLoad>(m_config.slow_factor);
        else
            m_executor->set_slowdown(m_config.slow_factor);
    }
    m_executor->set_injected_hang(&m_hang);
    if (!backend.is_async())  // a CPU rank: the pool its GEMMs and loops run on (a GPU rank's host has none busy)
        m_worker_times = WorkerThreadsTimes(openmp_worker_tids());

    m_schedule.lr = m_config.adamw.lr;
    m_schedule.min_lr = m_config.adamw.lr * m_config.min_lr_ratio;
    m_schedule.warmup = m_config.warmup;
    m_schedule.total = std::max(m_config.steps, 1);
}

// ZeRO-0 replicates everything and all-reduces gradient buckets; ZeRO-1..3 shard by bucket. Under a pipeline each
// stage holds its own chunks' parameters, and the tied embedding is a bucket of its own.
std::unique_ptr<TrainState> Trainer::make_state_for(const ParamLayout& layout, Communicator& group,
                                                    bool isolate_embedding) {
    const ParallelLayout& p = m_config.parallel;
    if (p.zero == 0) {
        const bool fp32_accum = m_config.fp32_grad_accum && m_config.precision == Precision::bf16;
        GradientSync* sync = nullptr;
        if (group.size() > 1) {
            m_syncs.push_back(std::make_unique<DataParallelSync>(
                group, layout, p.bucket_mb, fp32_accum ? 4 : dtype_size(compute_dtype(m_config.precision)), p.overlap,
                m_config.runtime.overlap_alternate, &m_hang));
            sync = m_syncs.back().get();
        }
        return std::make_unique<ReplicatedState>(m_be, layout, m_config.precision, m_config.fp32_grad_accum,
                                                 m_config.adamw, sync);
    }
    return std::make_unique<ZeroState>(m_be, layout, m_config.precision, m_config.fp32_grad_accum, m_config.adamw,
                                       group, p.zero, p.bucket_mb, isolate_embedding);
}

// The blocks' parameters reduce over dp x cp; an MoE model's experts over the ranks that hold the same experts.
// One rank of each group of replicated copies counts in the gradient norm.
void Trainer::make_state() {
    const ParallelLayout& p = m_config.parallel;
    std::unique_ptr<TrainState> blocks = make_state_for(m_layout, m_grid.dp_cp_group(), p.pp > 1);
    blocks->set_norm_owner(m_grid.dp_rank() == 0 && m_grid.cp_rank() == 0);
    if (m_expert_layout.units().empty()) {
        m_state = std::move(blocks);
        return;
    }
    std::unique_ptr<TrainState> experts = make_state_for(m_expert_layout, m_grid.edp_group(), false);
    experts->set_norm_owner(m_grid.edp_rank() == 0 && m_grid.cp_rank() == 0);
    m_state = std::make_unique<ExpertSplitState>(std::move(blocks), int(m_layout.units().size()), std::move(experts));
}

void Trainer::make_chunks() {
    const ParallelLayout& p = m_config.parallel;
    ModelOptions mo;
    mo.precision = m_config.precision;
    mo.recompute = m_config.recompute;
    mo.attention = m_config.attention;
    mo.micro_batch = m_config.batch;
    mo.tensor_parallel = m_tp.active() ? &m_tp : nullptr;
    mo.context_parallel = m_cp.active() ? &m_cp : nullptr;
    mo.expert_layout = &m_expert_layout;
    mo.expert_unit_base = int(m_layout.units().size());
    mo.expert_exchange = m_expert_exchange.get();
    mo.moe_capacity_factor = m_config.moe_capacity_factor;
    mo.moe_aux_loss_coef = m_config.moe_aux_loss_coef;
    const auto ranges = stage_chunks(m_config, m_grid.pp_rank());
    for (int c = 0; c < int(ranges.size()); ++c) {
        LocalChunk chunk;
        chunk.chunk = c;
        chunk.virtual_stage = c * p.pp + m_grid.pp_rank();
        chunk.model = std::make_unique<GPT>(m_config.model, mo, m_be, m_layout, ranges[size_t(c)].first,
                                            ranges[size_t(c)].second);
        m_chunks.push_back(std::move(chunk));
    }
}

Trainer::~Trainer() = default;

void Trainer::use_batches(BatchSource& batches) {
    if (m_local_batches)
        m_local_batches->set_source(batches);
    else
        m_executor->set_batch_source(batches);
}

StepMetrics Trainer::train_step() {
    const auto t0 = std::chrono::steady_clock::now();
    const int step = m_steps_done + 1;
    US_PROF_STEP(step);
    US_FLIGHT_FRAME("Trainer::train_step", FrameDetail::step);
    m_hang.begin_step(step);
    if (m_hang.fires(HangFault::skip))
        m_hang.block(
            "stops calling collectives, as a rank stuck in its data loader would; the others wait in their "
            "next collective");
    m_be.allocator().reset_peaks();
    const int M = m_config.grad_accum, dp = m_config.parallel.dp, pp = m_config.parallel.pp;
    const float grad_scale = 1.0f / float(M * dp);
    double loss_sum = 0.0, norm = 0.0, lr = 0.0;
    {
        US_PROF_ZONE(prof::Lane::host, prof::SpanKind::step, prof::OpClass::none, US_PROF_NAME("step"));
        record_memory_sample(m_be);  // what the process holds at each phase boundary, next to the tracked total
        loss_sum = m_executor->run_step(m_steps_done, grad_scale);
        US_PROF_PHASE(prof::Phase::optimizer, -1);
        record_memory_sample(m_be);
        US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::phase, prof::OpClass::none, US_PROF_NAME("optimizer"));
        m_state->finish_gradients();
        all_reduce_sp_replicated_grads(m_tp, *m_state, m_layout, m_be);  // sequence parallelism's partial sums
        if (pp > 1) m_state->sync_tied_embedding(m_grid.embedding_group());
        // The global norm counts every gradient element once, summed over the world: the tied embedding from the
        // first stage, tensors replicated over the tp group from tp rank 0, replicated states from dp rank 0 (a
        // ZeRO shard is this rank's own).
        const bool second_copy = pp > 1 && m_grid.pp_is_last_stage();
        double sumsq = m_state->local_grad_sumsq(!second_copy, m_grid.tp_rank() == 0);
        {
            US_FLIGHT_FRAME("Trainer::clip_gradients (global norm)", FrameDetail::none);
            sumsq = m_grid.world().all_reduce_sum(sumsq);
        }
        norm = std::sqrt(sumsq);
        const float clip = clip_coefficient(norm, m_config.grad_clip);
        lr = m_schedule.at(step);
        m_state->optimizer_step(lr, clip);
        m_be.synchronize();
        record_memory_sample(m_be);
    }
    m_steps_done = step;
    // The loss of the global batch: the last stage's token losses, summed over the data-parallel replicas and the
    // context-parallel ranks (each holds its positions' losses).
    {
        US_FLIGHT_FRAME("Trainer::reduce_loss", FrameDetail::none);
        loss_sum = m_grid.dp_cp_group().all_reduce_sum(m_grid.pp_group().all_reduce_sum(loss_sum));
    }
    StepMetrics r;
    r.step = step;
    r.tokens = m_config.tokens_per_step();
    r.loss = loss_sum / double(int64_t(M) * dp * m_config.batch * m_config.model.seq);
    r.lr = lr;
    r.grad_norm = norm;
    // A step lasts as long as its slowest rank: the throughput every view shows is the global batch's tokens over
    // that (one definition: the summary, the report and the GUI agree).
    {
        US_FLIGHT_FRAME("Trainer::step_time (the slowest rank's)", FrameDetail::none);
        r.step_ms = m_grid.world().all_reduce_max(seconds_since(t0) * 1e3);
    }
    r.tokens_per_s = double(r.tokens) / (r.step_ms / 1e3);
    r.memory = m_be.allocator().stats();
    if (m_config.model.is_moe()) collect_moe_stats(r);
    if (prof::enabled()) {
        prof::record_counter(US_PROF_NAME("loss"), r.loss);
        prof::record_counter(US_PROF_NAME("lr"), r.lr);
        prof::record_counter(US_PROF_NAME("grad_norm"), r.grad_norm);
        prof::record_counter(US_PROF_NAME("tokens_per_s"), r.tokens_per_s);
        prof::record_counter(US_PROF_NAME("step_ms"), r.step_ms);
        if (const ThreadTimes own = this_thread_times(); own.waiting_ms >= 0) {
            prof::record_counter(US_PROF_NAME(prof::kRunQueueWaitCounter), own.waiting_ms);
            prof::record_counter(US_PROF_NAME(prof::kThreadCpuCounter), own.on_cpu_ms);
        }
        if (!m_worker_times.empty())
            if (const ThreadTimes workers = m_worker_times.totals(); workers.waiting_ms >= 0) {
                prof::record_counter(US_PROF_NAME(prof::kWorkerRunQueueWaitCounter), workers.waiting_ms);
                prof::record_counter(US_PROF_NAME(prof::kWorkerCpuCounter), workers.on_cpu_ms);
            }
    }
    return r;
}

// The MoE blocks' routing over the step, summed over the data-parallel (and cp) ranks of this stage so every rank
// has the global figures (tp ranks route identically and count once); the balance loss as the mean over the global
// batch's sequences, like the loss. Recorded as counters: per layer the choices per expert, the dropped ones and
// the imbalance (most loaded expert over the mean).
void Trainer::collect_moe_stats(StepMetrics& r) {
    US_FLIGHT_FRAME("Trainer::collect_moe_stats", FrameDetail::none);
    std::vector<double> local;  // per stage layer: E routed, dropped, the aux and balance sums
    std::vector<int> layers;
    for (int l = 0; l < m_config.model.layers; ++l) {
        bool here = false;
        for (const LocalChunk& c : m_chunks) here |= l >= c.model->layer_begin() && l < c.model->layer_end();
        if (!here || !m_config.model.is_moe_layer(l)) continue;
        layers.push_back(l);
        MoeStats total;
        total.routed.assign(size_t(m_config.model.moe_experts), 0);
        for (LocalChunk& c : m_chunks) {
            const MoeStats& s = c.model->moe_stats()[size_t(l)];
            if (s.routed.empty()) continue;
            for (size_t e = 0; e < s.routed.size(); ++e) total.routed[e] += s.routed[e];
            total.dropped += s.dropped;
            total.aux_loss += s.aux_loss;
            total.balance += s.balance;
        }
        for (int64_t v : total.routed) local.push_back(double(v));
        local.push_back(double(total.dropped));
        local.push_back(total.aux_loss);
        local.push_back(total.balance);
    }
    for (LocalChunk& c : m_chunks) c.model->reset_moe_stats();
    Communicator& group = m_grid.dp_cp_group();  // the stage's ranks with other data (cp ranks: other positions)
    std::vector<double> all(local.size() * size_t(group.size()));
    group.all_gather_bytes(local.data(), local.size() * sizeof(double), all.data());
    std::vector<double> sum(local.size(), 0.0);
    for (int rk = 0; rk < group.size(); ++rk)
        for (size_t i = 0; i < sum.size(); ++i) {
            // Routing counts of cp ranks are their own positions' (sum); the aux sums were counted on cp rank 0.
            sum[i] += all[size_t(rk) * local.size() + i];
        }
    const int E = m_config.model.moe_experts;
    const int M = m_config.grad_accum, dp = m_config.parallel.dp;
    double aux = 0, balance = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
        const double* s = sum.data() + i * size_t(E + 3);
        std::vector<int64_t> routed(static_cast<size_t>(E));
        double most = 0, mean = 0;
        for (int e = 0; e < E; ++e) {
            routed[size_t(e)] = int64_t(s[e]);
            most = std::max(most, s[e]);
            mean += s[e] / E;
        }
        r.moe_dropped += int64_t(s[E]);
        aux += s[E + 1];
        balance += s[E + 2];
        if (prof::enabled()) {
            for (int e = 0; e < E; ++e)
                prof::record_counter(prof::string_id(fmt::format("moe.layer{}.expert{}", layers[i], e)), s[e]);
            prof::record_counter(prof::string_id(fmt::format("moe.layer{}.dropped", layers[i])), s[E]);
            prof::record_counter(prof::string_id(fmt::format("moe.layer{}.imbalance", layers[i])),
                                 mean > 0 ? most / mean : 0.0);
        }
        r.moe_routed.emplace_back(layers[i], std::move(routed));
    }
    // over the pipeline's stages, then the mean over the global batch's sequences
    aux = m_grid.pp_group().all_reduce_sum(aux);
    balance = m_grid.pp_group().all_reduce_sum(balance);
    r.moe_dropped = int64_t(m_grid.pp_group().all_reduce_sum(double(r.moe_dropped)));
    const double sequences = double(int64_t(M) * dp * m_config.batch);
    r.aux_loss = aux / sequences;
    r.moe_balance = balance / sequences / double(m_config.model.moe_layers());
    if (prof::enabled()) {
        prof::record_counter(US_PROF_NAME("moe_aux_loss"), r.aux_loss);
        prof::record_counter(US_PROF_NAME("moe_balance"), r.moe_balance);
    }
}

void Trainer::save(const std::string& path) {
    US_FLIGHT_FRAME("Trainer::save (checkpoint)", FrameDetail::none);
    // Rank 0 writes (atomically: the previous checkpoint stays whole if this one cannot be written). Whether it
    // could is agreed by every rank, so that a full disk ends the run with rank 0's message on every rank instead of
    // leaving the others waiting for it.
    std::string error;
    try {
        if (m_config.parallel.pp == 1 && m_config.parallel.tp == 1 && m_config.parallel.ep == 1) {
            // Every rank takes part (sharded states gather their pieces).
            save_checkpoint(path, m_config, {&m_layout, &m_expert_layout}, *m_state, m_steps_done,
                            m_grid.world_rank() == 0);
        } else {
            save_gathered(path);
        }
    } catch (const UserError& e) {
        error = e.what();
    }
    if (m_grid.world().all_reduce_max(error.empty() ? 0.0 : 1.0) > 0)
        fail_user("{}", error.empty()
                            ? fmt::format("rank 0 could not write the checkpoint '{}' (its message says why); "
                                          "the previous one is unchanged",
                                          path)
                            : error + "; the previous checkpoint is unchanged");
}

namespace {

// Rank 0's host copy of the whole model (the blocks' tensors, then the experts'), one block of `total` floats per
// state slot, and how every rank takes part in filling it.
struct HostGather {
    const TrainConfig& config;
    ProcessGrid& grid;
    TrainState& state;
    const int slots;
    const int64_t total;
    const bool lead;
    std::vector<float> host, mine, received;

    HostGather(const TrainConfig& c, ProcessGrid& g, TrainState& s, int64_t n)
        : config(c), grid(g), state(s), slots(s.has_optimizer_moments() ? 3 : 1), total(n), lead(g.world_rank() == 0) {
        if (lead) host.resize(size_t(total) * size_t(slots));
    }

    // One layout's tensors of every (stage, ep rank, tp rank): the holders export them (collectively over their
    // reduction group), the (dp = ep rank, cp 0) holder sends them to rank 0, which places them at `base`.
    template <typename LayoutOf>
    void gather_layout(const ParamLayout& target, int64_t base, const ParamLayout& mine_layout, bool experts,
                       LayoutOf&& layout_of) {
        const int ep = config.parallel.ep;
        for (int stage = 0; stage < config.parallel.pp; ++stage)
            for (int q = 0; q < (experts ? ep : 1); ++q) {
                const ParamLayout stage_layout = layout_of(stage, q);  // the same tensors on every tp rank
                const bool holder = grid.pp_rank() == stage && (!experts || grid.ep_rank() == q);
                for (int slot = 0; slot < slots; ++slot)
                    for (size_t i = 0; i < stage_layout.tensors().size(); ++i) {
                        const ParamTensor& t = stage_layout.tensors()[i];
                        if (!experts && stage > 0 && t.unit == stage_layout.embedding_unit()) continue;  // stage 0's
                        const ParamTensor* dst_t = target.find(t.name);
                        float* dst = lead ? host.data() + size_t(slot) * size_t(total) + base + dst_t->offset : nullptr;
                        if (holder) {
                            mine.resize(size_t(t.numel));
                            state.export_tensor(mine_layout.tensors()[i], StateSlot(slot), mine.data());
                        }
                        gather_tensor(t, q, stage, slot, dst);
                    }
            }
    }

    // One tensor's tp shards: each (ep rank q, stage, tp rank r) holder sends its shard to rank 0, which places it.
    void gather_tensor(const ParamTensor& t, int q, int stage, int slot, float* dst) {
        const int tp = config.parallel.tp;
        for (int r = 0; r < tp; ++r) {
            const int sender = grid_rank(config.parallel, GridCoords{q, stage, 0, 0, r});
            if (grid.world_rank() == sender && !lead) {
                grid.world().send(Tensor::of(mine.data(), t.numel), 0, 9000 + slot);
            } else if (lead) {
                const float* shard = mine.data();
                if (sender != 0) {
                    received.resize(size_t(t.numel));
                    grid.world().recv(Tensor::of(received.data(), t.numel), sender, 9000 + slot);
                    shard = received.data();
                }
                place_shard(t, TpPlacement{tp, r}, shard, dst);
            }
        }
    }
};

// Rank 0's host copy seen as a TrainState, so that it is written through the same writer as single-rank runs (the
// experts' tensors sit after the blocks' in the host copy, so the experts' whole layout reads them at an offset).
class HostState final : public TrainState {
public:
    HostState(const std::vector<float>& h, int64_t n, int64_t experts_at, int slots, int steps)
        : m_h(h), m_n(n), m_experts_at(experts_at), m_slots(slots), m_steps(steps) {}
    Tensor weights(int) override { return {}; }
    Tensor grads(int) override { return {}; }
    void initialize(const GPTConfig&, uint64_t) override {}
    void begin_step() override {}
    void begin_backward(int, bool) override {}
    void finish_gradients() override {}
    void sync_tied_embedding(Communicator&) override {}
    double local_grad_sumsq(bool, bool) override { return 0; }
    std::vector<Tensor> grad_pieces(const ParamTensor&) override { return {}; }
    bool sharded() const override { return false; }
    void optimizer_step(double, float) override {}
    int optimizer_steps_taken() const override { return m_steps; }
    bool has_optimizer_moments() const override { return m_slots == 3; }
    void export_tensor(const ParamTensor& t, StateSlot slot, float* out) override {
        std::copy_n(m_h.data() + size_t(slot) * size_t(m_n) + (t.expert ? m_experts_at : 0) + t.offset, t.numel, out);
    }
    void import_tensor(const ParamTensor&, StateSlot, const float*) override {}
    void set_optimizer_steps(int) override {}

private:
    const std::vector<float>& m_h;
    int64_t m_n, m_experts_at;
    int m_slots, m_steps;
};

}  // namespace

// A pipeline's or a tensor-parallel run's checkpoint holds whole tensors too: each (stage, tp rank) exports its
// shards (collectively over its data-parallel group), its first data-parallel rank sends them to rank 0, and rank
// 0 places them into the whole tensors and writes the model as a single rank would.
void Trainer::save_gathered(const std::string& path) {
    const ParamLayout whole = ParamLayout::whole_model(m_config.model);
    const ParamLayout whole_experts = ParamLayout::whole_experts(m_config.model);
    const int tp = m_config.parallel.tp, ep = m_config.parallel.ep;
    HostGather g(m_config, m_grid, *m_state, whole.total() + whole_experts.total());
    g.gather_layout(whole, 0, m_layout, false, [&](int stage, int) { return rank_layout(m_config, stage, 0); });
    if (m_config.model.is_moe())
        g.gather_layout(whole_experts, whole.total(), m_expert_layout, true, [&](int stage, int q) {
            return ParamLayout::build_experts(m_config.model, stage_chunks(m_config, stage), TpPlacement{tp, 0},
                                              EpPlacement{ep, q});
        });
    if (!g.lead) return;
    HostState gathered(g.host, g.total, whole.total(), g.slots, m_state->optimizer_steps_taken());
    save_checkpoint(path, m_config, {&whole, &whole_experts}, gathered, m_steps_done, true);
}

double Trainer::evaluate_loss(const int32_t* tokens, const int32_t* targets) {
    ChunkActivations acts;
    m_chunks.front().model->forward(acts, MicroBatch{tokens, targets}, Tensor{}, *m_state);
    return acts.loss_sum / double(int64_t(m_config.batch) * m_config.model.seq);
}

}  // namespace us
