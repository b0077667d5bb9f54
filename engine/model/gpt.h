// The GPT: embedding -> L x [LayerNorm -> causal self-attention (RoPE) -> residual -> LayerNorm -> MLP (GeLU)
// -> residual] -> LayerNorm -> tied LM head -> mean cross-entropy. Forward and backward are written by hand,
// layer by layer, as pairs. A GPT object runs one chunk of the model (all of it on a single rank; a pipeline
// stage's layers otherwise) for one micro-batch at a time; the activations of each micro-batch live in a
// ChunkActivations from its forward until its backward releases them.
//
// Under tensor parallelism (engine/model/tensor_parallel.h) the model holds its shard of the parameters and
// calls the Megatron mappings around its column- and row-parallel linears; with tp = 1 they are no-ops and the
// code is the single-rank code. Under context parallelism (engine/model/context_parallel.h) it runs on the
// rank's positions of each sequence (T = seq/cp) and its attention is the ring's.
//
// Legend: B batch, T time, C channels, V vocab, NH heads, HD head dim, N = B*T rows; under tensor parallelism
// R = rows of the residual stream on this rank (N, or N/tp with sequence parallelism), Ca = C/tp (the rank's
// heads' width), F = 4C/tp (its share of the MLP), Vr = its vocabulary rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/activations.h"
#include "common/settings/gpt_config.h"
#include "engine/model/moe.h"
#include "engine/model/param_access.h"
#include "engine/model/param_layout.h"
#include "engine/model/context_parallel.h"
#include "engine/model/tensor_parallel.h"

namespace us {

struct ModelOptions {
    Precision precision = Precision::fp32;
    Recompute recompute = Recompute::none;
    Attention attention = Attention::naive;
    int micro_batch = 1;  // B, in sequences
    // The tensor-parallel group's communication; null: tp 1. Must outlive the model and match the layout's tp.
    TensorParallel* tensor_parallel = nullptr;
    // Context parallelism: the rank's positions and the ring attention; null: cp 1. Must outlive the model.
    ContextParallel* context_parallel = nullptr;
    // Mixture of experts (the config's MoE blocks): the experts' layout, where its units start among the units
    // ParamAccess serves (after the blocks' layout's), and how rows reach the experts (null: this rank holds them
    // all). Capacity and the balance loss's weight.
    const ParamLayout* expert_layout = nullptr;
    int expert_unit_base = 0;
    ExpertExchange* expert_exchange = nullptr;
    double moe_capacity_factor = 0.0;
    double moe_aux_loss_coef = 0.0;
};

// One micro-batch of token ids in host memory: inputs and next-token targets, (B,T) each.
struct MicroBatch {
    const int32_t* tokens = nullptr;
    const int32_t* targets = nullptr;
};

// Zero-bubble pipelines split a block's backward in two: B computes the gradients of the inputs (what the
// previous stage waits for), W the weight gradients (which can wait to fill a bubble).
enum class BackwardPart { full, input, weight };

struct ChunkActivations {
    int micro_batch_index = 0;
    Allocation tokens;                 // (2,N) int32: inputs then targets
    Allocation embedding;              // (N,C) the embedding output, first chunk only
    Tensor input;                      // (R,C) the chunk's input: embedding output, or from the previous stage
    std::vector<Allocation> blocks;    // per block of the chunk: its saved activations
    Allocation head;                   // final norm output and stats, fp32 logits, losses; last chunk only
    std::vector<Allocation> deferred;  // per block, between B and W: the output gradients its weight GEMMs need
    std::vector<MoeActs> moe;          // per block: an MoE block's routed rows (empty for dense blocks)
    double loss_sum = 0.0;             // sum of per-token losses (last chunk only; see GPT::defer_loss)
};

class GPT {
public:
    // Runs blocks [layer_begin, layer_end) of `layout` (all of the layout's first chunk when not given).
    GPT(const GPTConfig& config, const ModelOptions& options, Backend& backend, const ParamLayout& layout,
        int layer_begin = -1, int layer_end = -1);

    const GPTConfig& config() const { return m_config; }
    const ModelOptions& options() const { return m_options; }
    const ParamLayout& layout() const { return m_layout; }
    const ActivationShape& shape() const { return m_shape; }
    bool has_embedding() const { return m_begin == 0; }         // embeds the tokens
    bool has_head() const { return m_end == m_config.layers; }  // final norm, LM head and loss
    int layer_begin() const { return m_begin; }
    int layer_end() const { return m_end; }

    // Runs the chunk's forward. `input` (R,C) is ignored on the first chunk, which embeds the tokens.
    // After it, acts.loss_sum holds the summed loss when the chunk has the head, or (defer_loss) the loss was
    // added to the backend's deferred sum (Backend::take_deferred_sum reads the step's total): reading it here
    // would make the host wait for the device between forward and backward.
    void forward(ChunkActivations& acts, const MicroBatch& batch, Tensor input, ParamAccess& params);
    void defer_loss(bool defer) { m_defer_loss = defer; }

    // The chunk's output (R,C): the last block's output (for the next pipeline stage).
    Tensor output(const ChunkActivations& acts) const;

    // After forward on the last chunk: the next-token probabilities (N,Vr) of the rank's vocabulary rows, fp32
    // (evaluation, sampling, tests).
    Tensor probabilities(const ChunkActivations& acts) const;

    // Runs the chunk's backward and releases acts' activations as they are consumed. `dout` (R,C) is the
    // gradient of the chunk's output (ignored on the last chunk, which starts from the loss); `dinput` (R,C)
    // receives the gradient of the chunk's input (ignored on the first chunk). grad_scale multiplies d(loss):
    // 1 / (micro-batches * data-parallel ranks) so that gradients are those of the global mean loss.
    // part: full, or input (B: keeps what W needs) then weight (W: the blocks' weight GEMMs, then frees).
    void backward(ChunkActivations& acts, Tensor dout, Tensor dinput, float grad_scale, ParamAccess& params,
                  BackwardPart part = BackwardPart::full);

    // MoE blocks' routing statistics since the last reset (per layer of the model; empty for dense layers).
    const std::vector<MoeStats>& moe_stats() const { return m_moe_stats; }
    void reset_moe_stats();

private:
    // `whole` is an (N,C) buffer for the sequence-parallel gathers (empty without SP); `moe` an MoE block's routed
    // rows.
    void block_forward(int layer, BlockActs& a, Tensor x, ParamAccess& params, Tensor whole, MoeActs* moe,
                       MoeStats* stats);
    void block_backward(int layer, BlockActs& a, Tensor x, BackwardScratch& s, ParamAccess& params,
                        const DeferredGrads* keep, MoeActs* moe, float grad_scale);
    void moe_forward(int layer, BlockActs& a, const BlockParams& p, ParamAccess& params, Tensor whole, MoeActs& moe,
                     MoeStats& stats);
    void moe_backward(int layer, BlockActs& a, const BlockParams& p, const BlockParams& d, BackwardScratch& s,
                      ParamAccess& params, MoeActs& moe, float grad_scale);
    int expert_unit(int layer) const { return m_options.expert_unit_base + m_options.expert_layout->block_unit(layer); }
    bool is_moe(int layer) const { return m_config.is_moe_layer(layer); }
    void block_weight_grads(int layer, const BlockActs& a, const DeferredGrads& d, ParamAccess& params, Tensor whole);
    void weight_backward(ChunkActivations& acts, ParamAccess& params);
    void embedding_forward(ChunkActivations& acts, ParamAccess& params, Tensor whole);
    void embedding_backward(ChunkActivations& acts, BackwardScratch& s, ParamAccess& params);
    void head_forward(ChunkActivations& acts, Tensor x, ParamAccess& params, Tensor whole);
    void head_backward(ChunkActivations& acts, Tensor x, BackwardScratch& s, float grad_scale, ParamAccess& params);
    // `which` names the linear layer in profiles (Linear enum in gpt.cpp). An empty bias is skipped.
    void matmul_forward(int which, Tensor out, Tensor inp, Tensor weight, Tensor bias, int IC, int OC,
                        Tensor residual = {});
    void matmul_gelu_forward(int which, Tensor out, Tensor pre, Tensor inp, Tensor weight, Tensor bias, int IC, int OC);
    void matmul_dgelu_backward(int which, Tensor dinp, Tensor pre, Tensor dout, Tensor weight, int IC, int OC);
    void matmul_backward_input(int which, Tensor dinp, Tensor dbias, Tensor dout, Tensor weight, int IC, int OC);
    void matmul_backward_weight(int which, Tensor dweight, Tensor dout, Tensor inp, int IC, int OC);
    // out (R,C) = residual + a row-parallel linear of inp (N,IC) summed over the tp group + bias.
    void row_parallel_forward(int which, Tensor out, Tensor residual, Tensor inp, Tensor weight, Tensor bias, int IC,
                              Tensor whole);
    // The attention core: the causal attention of the rank's heads, or ring attention under context parallelism.
    void attention_forward(BlockActs& a);
    void attention_backward(Tensor dqkv, Tensor datty, const BlockActs& a);
    Tensor positions() const;  // RoPE's: the rank's positions under cp, else empty (0..T-1)
    BlockActs view_block(const ChunkActivations& acts, int index) const;

    GPTConfig m_config;
    ModelOptions m_options;
    Backend& m_be;
    TensorParallel m_no_tp;  // tp 1, when the options name no group
    TensorParallel& m_tp;
    ContextParallel* m_cp = nullptr;  // null or inactive: cp 1
    // --attention flash without context parallelism: the blockwise attention over the rank's whole sequence (a
    // one-rank "ring" that never communicates).
    std::unique_ptr<Communicator> m_flash_group;
    std::unique_ptr<ContextParallel> m_flash;
    std::unique_ptr<LocalExperts> m_local_experts;  // when the options name no exchange
    std::unique_ptr<MoeLayer> m_moe;
    std::vector<MoeStats> m_moe_stats;
    ParamLayout m_layout;
    bool m_defer_loss = false;
    ActivationShape m_shape;
    int m_begin = 0, m_end = 0;
    std::vector<uint32_t> m_block_names;  // profiler string ids "block l"
};

}  // namespace us
