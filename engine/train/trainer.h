// The trainer: the one place that composes backend, model, training state, data and optimizer schedule into
// training steps. The parallelisms are applied here, in one fixed order from the innermost: tensor (and sequence)
// parallelism changes the layers, context parallelism the sequence each rank sees and its attention, pipeline
// parallelism chooses the layers a rank runs, data parallelism and ZeRO decide how gradients and optimizer state
// are reduced and sharded.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/gpt.h"
#include "engine/parallel/grid.h"
#include "engine/parallel/injected_hang.h"
#include "engine/parallel/injected_load.h"
#include "engine/train/core_wait.h"
#include "engine/parallel/pipeline_executor.h"
#include "engine/model/context_parallel.h"
#include "engine/model/tensor_parallel.h"
#include "engine/optim/lr_schedule.h"
#include "common/settings/config.h"
#include "engine/data/data_loader.h"
#include "engine/parallel/train_state.h"

namespace us {

struct StepMetrics {
    int step = 0;       // 1-based
    double loss = 0.0;  // mean over the global batch's tokens
    double lr = 0.0;
    double grad_norm = 0.0;     // before clipping
    int64_t tokens = 0;         // global tokens in the step
    double step_ms = 0.0;       // wall time of the slowest rank
    double tokens_per_s = 0.0;  // tokens / step_ms
    MemoryStats memory;         // peaks are within this step
    // Mixture of experts (0 for a dense model): the balance loss (added to the loss the gradients follow, not to
    // `loss`), choices dropped beyond the experts' capacity, and per MoE layer the choices each expert received,
    // all over the global batch.
    double aux_loss = 0.0;
    double moe_balance = 0.0;  // E sum_i f_i P_i, mean over MoE layers and sequences: 1 balanced, up to E
    int64_t moe_dropped = 0;
    std::vector<std::pair<int, std::vector<int64_t>>> moe_routed;  // (layer, per expert) for this stage's layers
};

class GradientSync;

class Trainer {
public:
    // `grid` gives the rank's place and its groups; without one the trainer runs alone (a local grid).
    Trainer(const TrainConfig& config, Backend& backend, ProcessGrid* grid = nullptr);
    ~Trainer();
    // Stops an injected noisy neighbour (--slow-kind load) and unpins the trainer thread: the steps are over.
    void end_injected_load() { m_load.reset(); }

    int steps_done() const { return m_steps_done; }
    StepMetrics train_step();
    void save(const std::string& path);

    const GPT& model() const { return *m_chunks.front().model; }  // the rank's first chunk
    GPT& chunk_model(int chunk) { return *m_chunks[size_t(chunk)].model; }
    const ParamLayout& layout() const { return m_layout; }
    const ParamLayout& expert_layout() const { return m_expert_layout; }
    ProcessGrid& grid() { return m_grid; }
    TrainState& state() { return *m_state; }
    const TrainConfig& config() const { return m_config; }

    // Reads the micro-batches from `batches` instead of the data loader from now on (tests replaying recorded
    // batches). `batches` must outlive the trainer's steps.
    void use_batches(BatchSource& batches);

    // Runs forward only on one micro-batch of given tokens and returns its mean loss (one rank, no pipeline).
    double evaluate_loss(const int32_t* tokens, const int32_t* targets);
    // The layer ranges of the chunks of pipeline stage `stage` (virtual stage chunk * pp + stage).
    static std::vector<std::pair<int, int>> stage_chunks(const TrainConfig& cfg, int stage);
    // The parameter layout of the rank at pipeline stage `stage` and tensor-parallel rank `tp_rank`.
    static ParamLayout rank_layout(const TrainConfig& cfg, int stage, int tp_rank);

private:
    void collect_moe_stats(StepMetrics& r);
    void make_state();
    std::unique_ptr<TrainState> make_state_for(const ParamLayout& layout, Communicator& group, bool isolate_embedding);
    void make_chunks();
    void save_gathered(const std::string& path);

    TrainConfig m_config;
    Backend& m_be;
    std::unique_ptr<ProcessGrid> m_own_grid;
    ProcessGrid& m_grid;
    InjectedHang m_hang;  // --hang-rank: this rank's injected hang, if it is the one
    TensorParallel m_tp;
    ContextParallel m_cp;
    ParamLayout m_layout;
    std::vector<std::unique_ptr<GradientSync>> m_syncs;
    std::unique_ptr<TrainState> m_state;
    ParamLayout m_expert_layout;  // mixture of experts: the rank's experts (empty for a dense model)
    std::unique_ptr<ExpertExchange> m_expert_exchange;  // expert parallelism's all-to-all (null: every expert here)
    std::vector<LocalChunk> m_chunks;
    std::unique_ptr<PipelineExecutor> m_executor;
    std::unique_ptr<InjectedLoad> m_load;  // --slow-kind load: the busy threads sharing this rank's CPU
    WorkerThreadsTimes m_worker_times;     // its OpenMP workers' times on and waiting for a core, at each step's end
    TokenDataset m_data;
    std::unique_ptr<DataLoader> m_loader;
    std::unique_ptr<LocalSequenceBatches> m_local_batches;  // context parallelism: the rank's positions
    LrSchedule m_schedule;
    int m_steps_done = 0;
};

}  // namespace us
