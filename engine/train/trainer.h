// The trainer: the one place that composes backend, model, training state, data and optimizer schedule into
// training steps (and, as they land, the communicators, data parallelism, ZeRO and pipeline schedules).
#pragma once

#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/gpt.h"
#include "engine/parallel/grid.h"
#include "engine/parallel/pipeline_executor.h"
#include "engine/optim/lr_schedule.h"
#include "engine/train/config.h"
#include "engine/train/data_loader.h"
#include "engine/train/train_state.h"

namespace us {

struct StepMetrics {
    int step = 0;             // 1-based
    double loss = 0.0;        // mean over the global batch's tokens
    double lr = 0.0;
    double grad_norm = 0.0;   // before clipping
    int64_t tokens = 0;       // global tokens in the step
    double step_ms = 0.0;
    double tokens_per_s = 0.0;
    MemoryStats memory;       // peaks are within this step
};

class GradientSync;

class Trainer {
public:
    // `grid` gives the rank's place and its groups; without one the trainer runs alone (a local grid).
    Trainer(const TrainConfig& config, Backend& backend, ProcessGrid* grid = nullptr);
    ~Trainer();

    int steps_done() const { return m_steps_done; }
    StepMetrics train_step();
    void save(const std::string& path);

    const GPT& model() const { return *m_chunks.front().model; }  // the rank's first chunk
    const ParamLayout& layout() const { return m_layout; }
    ProcessGrid& grid() { return m_grid; }
    TrainState& state() { return *m_state; }
    const TrainConfig& config() const { return m_config; }

    // Runs forward only on one micro-batch of given tokens and returns its mean loss (one rank, no pipeline).
    double evaluate_loss(const int32_t* tokens, const int32_t* targets);
    // The layer ranges of the chunks of pipeline stage `stage` (virtual stage chunk * pp + stage).
    static std::vector<std::pair<int, int>> stage_chunks(const TrainConfig& cfg, int stage);

private:
    TrainConfig m_config;
    Backend& m_be;
    std::unique_ptr<ProcessGrid> m_own_grid;
    ProcessGrid& m_grid;
    ParamLayout m_layout;
    std::unique_ptr<GradientSync> m_sync;
    std::unique_ptr<TrainState> m_state;
    std::vector<LocalChunk> m_chunks;
    std::unique_ptr<PipelineExecutor> m_executor;
    TokenDataset m_data;
    std::unique_ptr<DataLoader> m_loader;
    LrSchedule m_schedule;
    int m_steps_done = 0;
    void save_pipeline(const std::string& path);
};

}  // namespace us
