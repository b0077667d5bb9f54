// Runs one stage's schedule (pipeline_schedule.h) for a training step: forwards and backwards of its chunks in the
// listed order, activations and their gradients moving to the neighbouring virtual stages by non-blocking
// point-to-point transfers (received one action ahead, recorded on the p2p lane). Without a pipeline (pp 1) the
// same code runs F0 B0 F1 B1 ...: there is one way a step runs.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "engine/model/gpt.h"
#include "engine/parallel/grid.h"
#include "engine/parallel/injected_hang.h"
#include "engine/parallel/injected_slowdown.h"
#include "common/schedule/pipeline_schedule.h"
#include "engine/data/data_loader.h"
#include "engine/parallel/train_state.h"

namespace us {

// A chunk this rank runs: virtual stage chunk * pp + stage.
struct LocalChunk {
    int chunk = 0;
    int virtual_stage = 0;
    std::unique_ptr<GPT> model;
};

class PipelineExecutor {
public:
    PipelineExecutor(ProcessGrid& grid, const PipelineShape& shape, std::vector<PipeAction> actions,
                     std::vector<LocalChunk>& chunks, TrainState& state, Backend& backend, BatchSource& batches,
                     int micro_batch, int seq);
    // Runs the step's actions. Returns the summed token losses this rank computed (the last stage's), 0 elsewhere.
    double run_step(int64_t step_index, float grad_scale);
    const std::vector<PipeAction>& actions() const { return m_actions; }
    void set_batch_source(BatchSource& batches) { m_batches = &batches; }
    // An injected straggler (--slow-rank): each forward and backward followed by its extra work.
    void set_slowdown(double factor) { m_slowdown = std::make_unique<InjectedSlowdown>(m_be, factor); }
    // An injected hang (--hang-kind p2p): the stage's first send of the step becomes a receive.
    void set_injected_hang(const InjectedHang* hang) { m_hang = hang; }

private:
    struct Key {
        int mb, chunk;
        auto operator<=>(const Key&) const = default;
    };
    struct Transfer {
        CommHandle handle;
        Allocation buffer;
    };
    LocalChunk& local(int chunk);
    int virtual_stages() const { return m_shape.pp * m_shape.chunks; }
    int tag(int kind, int target_vstage, int mb) const;
    void post_receives(size_t from);  // for the actions from `from` on (one ahead)
    Tensor take_received(std::map<Key, Transfer>& pending, Key k, Allocation& keep);
    void forward(const PipeAction& a, int64_t step_index);
    void backward(const PipeAction& a, float grad_scale);
    void reap_sends(bool wait);
    CommHandle send(Tensor buf, int peer, int tag);
    void inject_slowdown(std::chrono::steady_clock::time_point began);

    ProcessGrid& m_grid;
    PipelineShape m_shape;
    std::vector<PipeAction> m_actions;
    std::vector<LocalChunk>& m_chunks;
    TrainState& m_state;
    Backend& m_be;
    std::unique_ptr<InjectedSlowdown> m_slowdown;
    const InjectedHang* m_hang = nullptr;
    BatchSource* m_batches;
    int m_rows;  // B * T: the tokens of a micro-batch
    int64_t m_boundary_elements = 0;
    DType m_dtype;
    std::map<Key, ChunkActivations> m_acts;
    std::map<Key, Allocation> m_inputs;  // received activations, kept until the backward
    std::map<Key, Transfer> m_recv_acts, m_recv_grads;
    std::map<Key, CommHandle> m_output_sends;  // a forward's output must be sent before it is freed
    std::vector<Transfer> m_sends;
    std::vector<int32_t> m_tokens, m_targets;
    double m_loss_sum = 0;
};

}  // namespace us
