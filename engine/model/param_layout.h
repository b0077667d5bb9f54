// Where every parameter lives in the flat buffers. One flat buffer per category (params, grads, master weights,
// moments) shares this layout, so ZeRO shards and DP buckets are plain offset ranges.
//
// The buffer is a sequence of units in forward order: the token embedding, one unit per transformer block, the
// final LayerNorm. Inside a block the tensors are in forward order too, so backward produces gradients at
// decreasing offsets: a bucket at the end of the buffer is complete first. Names and [out, in] matrix layout
// follow nanoGPT / nn.Linear, which is also how checkpoints are written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/settings/gpt_config.h"

namespace us {

// How a tensor of the whole model is split over the tensor-parallel group.
enum class TpSplit : uint8_t {
    replicated,  // every tp rank holds all of it: LayerNorms, the row-parallel layers' biases
    rows,        // column-parallel: output rows split (mlp.c_fc; attn.c_attn's q, k and v each split by heads)
    cols,        // row-parallel: input columns split (attn.c_proj, mlp.c_proj)
    vocab,       // the embedding: rows of the vocabulary, padded to a multiple of tp, split
};

struct ParamTensor {
    std::string name;  // e.g. transformer.h.3.attn.c_attn.weight
    int unit = 0;      // index into ParamLayout::units()
    int64_t offset = 0;
    int64_t numel = 0;
    int rows = 0;  // this rank's shard: matrices [rows, cols] = [out, in]; vectors rows = numel, cols = 1
    int cols = 1;
    bool decay = false;  // weight decay applies: matrices and the embedding, not biases or norms
    TpSplit split = TpSplit::replicated;
    bool expert = false;                 // an expert's tensor (a layout of experts: build_experts)
    bool grad_from_all_rows = false;     // replicated, and its gradient sees every token row on every tp rank even
                                         // under sequence parallelism (the router): nothing to sum over tp
    int row_groups = 1;                  // rows split group by group (c_attn: q, k and v)
    int whole_rows = 0, whole_cols = 1;  // the whole tensor, as checkpoints hold it
    int64_t whole_numel() const { return int64_t(whole_rows) * whole_cols; }
};

// Where a rank sits in its tensor-parallel group; {1, 0} without tensor parallelism.
struct TpPlacement {
    int tp = 1;
    int rank = 0;
};

// Where a rank sits in its expert-parallel group: it holds experts [rank E/ep, (rank + 1) E/ep).
struct EpPlacement {
    int ep = 1;
    int rank = 0;
};

enum class UnitKind { embedding, block, final_norm, experts };

struct ParamUnit {
    UnitKind kind = UnitKind::block;
    int layer = -1;  // block index for blocks; -1 otherwise
    int64_t offset = 0;
    int64_t numel = 0;
    int first_tensor = 0;
    int tensor_count = 0;
};

class ParamLayout {
public:
    // The layout of a rank holding the blocks of one or more chunks (layer ranges, in order; several under an
    // interleaved pipeline schedule). A rank holding layer 0 holds the token embedding; a rank holding the last
    // layer holds the final norm and, for the tied LM head, its own copy of the embedding (Megatron keeps the two
    // copies equal by summing their gradients). A single-rank model is build(cfg, {{0, L}}).
    static ParamLayout build(const GPTConfig& cfg, const std::vector<std::pair<int, int>>& chunks, TpPlacement tp = {});
    static ParamLayout build(const GPTConfig& cfg, int layer_begin, int layer_end, TpPlacement tp = {}) {
        return build(cfg, {{layer_begin, layer_end}}, tp);
    }
    static ParamLayout whole_model(const GPTConfig& cfg, TpPlacement tp = {}) { return build(cfg, 0, cfg.layers, tp); }
    // The experts of the MoE blocks in the chunks that this rank holds: one unit per MoE block, its local experts'
    // tensors in order (each expert: c_fc weight and bias, c_proj weight and bias). The blocks' other tensors
    // (the router among them) are in build()'s layout. Empty for a dense model.
    static ParamLayout build_experts(const GPTConfig& cfg, const std::vector<std::pair<int, int>>& chunks,
                                     TpPlacement tp = {}, EpPlacement ep = {});
    static ParamLayout whole_experts(const GPTConfig& cfg) { return build_experts(cfg, {{0, cfg.layers}}); }
    bool is_experts() const { return m_experts; }
    int first_expert() const { return m_first_expert; }  // of the rank's experts (build_experts)
    int local_experts() const { return m_local_experts; }
    bool is_first_chunk() const { return m_layer_begin == 0; }
    bool is_last_chunk() const { return m_final_unit >= 0; }
    const std::vector<std::pair<int, int>>& chunks() const { return m_chunks; }

    const std::vector<ParamTensor>& tensors() const { return m_tensors; }
    const std::vector<ParamUnit>& units() const { return m_units; }
    int64_t total() const { return m_total; }
    const ParamTensor* find(const std::string& name) const;

    int embedding_unit() const { return m_embedding_unit; }  // -1 when absent
    int final_unit() const { return m_final_unit; }          // -1 when absent
    int block_unit(int layer) const;                         // -1 when the layer is not in this layout
                                                             // (of build_experts: the layer's experts)
    int layer_begin() const { return m_layer_begin; }        // of the first chunk
    int layer_end() const { return m_layer_end; }            // of the last chunk

    // Tensor parallelism: the rank's place, and its slice of the vocabulary [vocab_begin, vocab_begin + vocab_rows)
    // of which the first vocab_valid rows are real tokens (the rest pads the vocabulary to a multiple of tp).
    const TpPlacement& tp() const { return m_tp; }
    int vocab_rows() const { return m_vocab_rows; }
    int vocab_begin() const { return m_tp.rank * m_vocab_rows; }
    int vocab_valid() const { return m_vocab_valid; }

private:
    struct TensorSpec;
    void add_unit(UnitKind kind, int layer, const std::vector<TensorSpec>& spec);

    std::vector<ParamTensor> m_tensors;
    std::vector<ParamUnit> m_units;
    int64_t m_total = 0;
    int m_embedding_unit = -1, m_final_unit = -1;
    int m_layer_begin = 0, m_layer_end = 0;
    std::vector<std::pair<int, int>> m_chunks;
    std::vector<int> m_unit_of_layer;  // -1 for layers held elsewhere
    TpPlacement m_tp;
    int m_vocab_rows = 0, m_vocab_valid = 0;
    bool m_experts = false;
    int m_first_expert = 0, m_local_experts = 0;
};

// A rank's shard of a whole tensor (checkpoint layout, fp32), and back. Padding rows of the vocabulary read as
// zeros and are not written back.
void take_shard(const ParamTensor& t, const TpPlacement& tp, const float* whole, float* shard);
void place_shard(const ParamTensor& t, const TpPlacement& tp, const float* shard, float* whole);

// Views of one block's tensors inside the unit's storage (weights or gradients: same offsets). Shapes are the
// rank's shards: with Ca = C/tp (its heads' width) and F = 4C/tp (its share of the MLP). An MoE block has the
// router instead of the MLP (its experts live in the experts' layout).
struct BlockParams {
    Tensor ln1_w, ln1_b;          // (C)
    Tensor qkv_w, qkv_b;          // (3Ca, C), (3Ca): q, k, v of the rank's heads
    Tensor attproj_w, attproj_b;  // (C, Ca), (C)
    Tensor ln2_w, ln2_b;          // (C)
    Tensor fc_w, fc_b;            // (F, C), (F)
    Tensor fcproj_w, fcproj_b;    // (C, F), (C)
    Tensor router_w;              // (E, C), MoE blocks only: whole on every tp rank
};
BlockParams block_params(Tensor unit_storage, int C, int tp = 1, int moe_experts = 0);

// One expert of an experts unit (build_experts): the MLP's shapes and tp split.
struct ExpertParams {
    Tensor fc_w, fc_b;          // (F, C), (F)
    Tensor fcproj_w, fcproj_b;  // (C, F), (C)
};
ExpertParams expert_params(Tensor unit_storage, int C, int tp, int local_expert);

struct EmbeddingParams {
    Tensor wte;  // (Vr, C): the rank's rows of the (padded) vocabulary
};
struct FinalNormParams {
    Tensor lnf_w, lnf_b;  // (C)
};
inline EmbeddingParams embedding_params(Tensor unit_storage) { return {unit_storage}; }
inline FinalNormParams final_norm_params(Tensor unit_storage, int C) {
    return {unit_storage.slice(0, C), unit_storage.slice(C, C)};
}

}  // namespace us
