// What the planner knows about a model: its shape as data. Three families share one description: this engine's GPT
// (tied embeddings, RoPE, LayerNorm, GeLU MLP with biases: every preset in assets/presets), GPT-3 (the same with
// learned positions), and Llama-style models (grouped-query attention, SwiGLU, RMSNorm, no biases, untied
// embeddings), each optionally with a mixture of experts. Descriptions live in assets/models/*.json; the parameter
// count below is tested against each model's published total (docs/planner.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace us::predict {

enum class ModelFamily { engine_gpt, gpt3, llama };

struct ModelDesc {
    std::string name;         // e.g. "llama3-8b", or an engine preset's name
    std::string description;  // one line, with the source of the shape
    ModelFamily family = ModelFamily::engine_gpt;
    // shape
    int64_t vocab = 256, hidden = 256, layers = 4, heads = 4, seq = 128;
    int64_t kv_heads = 0;    // grouped-query attention: key/value heads (0: = heads)
    int64_t head_dim = 0;    // 0: hidden / heads (GPT-3 13B has 40 heads of 128 on a hidden of 5140)
    int64_t ffn_hidden = 0;  // the MLP's inner width (0: 4 x hidden)
    bool swiglu = false;     // SwiGLU MLP (3 matrices) instead of GeLU (2)
    bool rmsnorm = false;    // RMSNorm (a weight) instead of LayerNorm (weight and bias)
    bool biases = true;      // linear layers carry biases
    bool tied_embeddings = true;
    bool learned_positions = false;  // a (max_positions, hidden) table (GPT-3); RoPE otherwise
    int64_t max_positions = 0;       // rows of that table (0: seq)
    // mixture of experts: every moe_every-th block (moe_every - 1, 2 moe_every - 1, ...) has E experts, K per token
    int64_t moe_experts = 0, moe_topk = 2, moe_every = 1;
    double moe_capacity_factor = 0;
    // published figures, for the tests and docs/planner.md
    double published_params = 0;         // total parameters as published (0: none)
    double published_active_params = 0;  // MoE: active per token
    std::string source;                  // where the shape and the totals come from

    int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
    int64_t head_size() const { return head_dim > 0 ? head_dim : hidden / heads; }
    int64_t attn_width() const { return heads * head_size(); }  // q and attention output width (a * d)
    int64_t kv_width() const { return kv() * head_size(); }     // k and v width each
    int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
    bool is_moe() const { return moe_experts > 0; }
    bool is_moe_layer(int64_t layer) const { return is_moe() && layer % moe_every == moe_every - 1; }
    int64_t moe_layers() const;

    // Parameters of the pieces (whole, before any split).
    int64_t attention_params() const;                                    // q, k, v, o (+ biases)
    int64_t mlp_params() const;                                          // one dense MLP, or one expert
    int64_t norm_params() const;                                         // one norm
    int64_t block_params(int64_t layer, int64_t experts_counted) const;  // with `experts_counted` experts if MoE
    int64_t embedding_params() const;                                    // token table (+ position table)
    int64_t head_params() const;                                         // untied output matrix (0 when tied)
    int64_t num_params() const;                                          // total
    int64_t active_params() const;                                       // a token's: K experts instead of E
    // Training FLOPs per token, 6N + 12 L (a d) s (docs/formulas.md, the attention term with the attention width)
    double flops_per_token() const;
};

std::string family_name(ModelFamily f);
ModelFamily parse_family(const std::string& text, const std::string& where);  // UserError naming `where`

// The model `spec` names: a file (a path ending in .json that exists), a description in assets/models/NAME.json, or
// an engine preset in assets/presets/NAME.json. UserError listing what is known otherwise.
ModelDesc load_model(const std::string& spec);
// A UserError naming `source` and the field when a description's sizes are not a model: zero or beyond the bounds
// (common/settings/gpt_config.h), heads that do not divide the width, more experts routed to than there are.
void check_model(const ModelDesc& m, const std::string& source);
// Parses a description; UserError naming `source` and the field on missing or malformed values.
ModelDesc model_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json model_to_json(const ModelDesc& m);
// This engine's GPT of a given shape (from the training flags or a preset).
ModelDesc engine_model(const std::string& name, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                       int64_t seq, int64_t moe_experts, int64_t moe_topk, int64_t moe_every, double capacity_factor);
// An engine preset (assets/presets/NAME.json) as a description, even where a model file has the same name.
ModelDesc engine_preset_model(const std::string& preset);
// Names of assets/models/*.json and the engine presets, for messages and --list.
std::vector<std::string> known_models();
std::string models_dir();  // assets/models (assets_dir() based, so ULTRASCOPE_ASSETS moves it)

}  // namespace us::predict
