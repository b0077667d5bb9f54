#include "profiler/predict/model_desc.h"

#include <algorithm>
#include <filesystem>

#include "profiler/predict/json_fields.h"
#include "common/core/check.h"
#include "common/settings/model_bounds.h"
#include "common/settings/config.h"

namespace us::predict {

namespace fs = std::filesystem;

int64_t ModelDesc::moe_layers() const {
    int64_t n = 0;
    for (int64_t l = 0; l < layers; ++l) n += is_moe_layer(l);
    return n;
}

// q and o are (a d, h), k and v (kv d, h) each; biases on q, k, v and o when the model has them.
int64_t ModelDesc::attention_params() const {
    const int64_t h = hidden, q = attn_width(), k = kv_width();
    return h * q + 2 * h * k + q * h + (biases ? q + 2 * k + h : 0);
}

// GeLU: up (F, h) and down (h, F) with biases F and h; SwiGLU: gate, up and down, no biases in Llama.
int64_t ModelDesc::mlp_params() const {
    const int64_t h = hidden, F = ffn();
    return (swiglu ? 3 : 2) * h * F + (biases ? F + h + (swiglu ? F : 0) : 0);
}

int64_t ModelDesc::norm_params() const { return rmsnorm ? hidden : 2 * hidden; }

int64_t ModelDesc::block_params(int64_t layer, int64_t experts_counted) const {
    const int64_t attention_and_norms = attention_params() + 2 * norm_params();
    if (!is_moe_layer(layer)) return attention_and_norms + mlp_params();
    return attention_and_norms + hidden * moe_experts /* router, no bias */ + experts_counted * mlp_params();
}

int64_t ModelDesc::embedding_params() const {
    return vocab * hidden + (learned_positions ? (max_positions > 0 ? max_positions : seq) * hidden : 0);
}

int64_t ModelDesc::head_params() const { return tied_embeddings ? 0 : vocab * hidden; }

int64_t ModelDesc::num_params() const {
    int64_t n = embedding_params() + head_params() + norm_params();  // + the final norm
    for (int64_t l = 0; l < layers; ++l) n += block_params(l, moe_experts);
    return n;
}

int64_t ModelDesc::active_params() const {
    int64_t n = embedding_params() + head_params() + norm_params();
    for (int64_t l = 0; l < layers; ++l) n += block_params(l, moe_topk);
    return n;
}

double ModelDesc::flops_per_token() const {
    return 6.0 * double(active_params()) + 12.0 * double(layers) * double(attn_width()) * double(seq);
}

std::string family_name(ModelFamily f) {
    switch (f) {
        case ModelFamily::engine_gpt:
            return "engine-gpt";
        case ModelFamily::gpt3:
            return "gpt3";
        case ModelFamily::llama:
            return "llama";
    }
    return "?";
}

ModelFamily parse_family(const std::string& text, const std::string& where) {
    if (text == "engine-gpt") return ModelFamily::engine_gpt;
    if (text == "gpt3") return ModelFamily::gpt3;
    if (text == "llama") return ModelFamily::llama;
    fail_user("{}: field 'family' is '{}': expected engine-gpt, gpt3 or llama", where, text);
}

ModelDesc model_from_json(const nlohmann::json& j, const std::string& source) {
    const JsonFields f(j, source,
                       {"name",
                        "description",
                        "family",
                        "vocab",
                        "hidden",
                        "layers",
                        "heads",
                        "kv_heads",
                        "head_dim",
                        "ffn_hidden",
                        "seq",
                        "swiglu",
                        "rmsnorm",
                        "biases",
                        "tied_embeddings",
                        "learned_positions",
                        "max_positions",
                        "moe_experts",
                        "moe_topk",
                        "moe_every",
                        "moe_capacity_factor",
                        "published_params",
                        "published_active_params",
                        "source"});
    ModelDesc m;
    m.name = f.required_text("name");
    m.description = f.text("description", "");
    m.family = parse_family(f.required_text("family"), source);
    // Family defaults, each overridable.
    const bool llama = m.family == ModelFamily::llama;
    m.swiglu = llama, m.rmsnorm = llama, m.biases = !llama, m.tied_embeddings = !llama;
    m.learned_positions = m.family == ModelFamily::gpt3;
    m.vocab = f.required_integer("vocab");
    m.hidden = f.required_integer("hidden");
    m.layers = f.required_integer("layers");
    m.heads = f.required_integer("heads");
    m.seq = f.required_integer("seq");
    m.kv_heads = f.integer("kv_heads", 0, 1);
    m.head_dim = f.integer("head_dim", 0, 1);
    m.ffn_hidden = f.integer("ffn_hidden", 0, 1);
    m.swiglu = f.boolean("swiglu", m.swiglu);
    m.rmsnorm = f.boolean("rmsnorm", m.rmsnorm);
    m.biases = f.boolean("biases", m.biases);
    m.tied_embeddings = f.boolean("tied_embeddings", m.tied_embeddings);
    m.learned_positions = f.boolean("learned_positions", m.learned_positions);
    m.max_positions = f.integer("max_positions", 0, 1);
    m.moe_experts = f.integer("moe_experts", 0, 0);
    m.moe_topk = f.integer("moe_topk", 2, 1);
    m.moe_every = f.integer("moe_every", 1, 1);
    m.moe_capacity_factor = f.number("moe_capacity_factor", 0);
    m.published_params = f.number("published_params", 0);
    m.published_active_params = f.number("published_active_params", 0);
    m.source = f.text("source", "");
    check_model(m, source);
    return m;
}

nlohmann::json model_to_json(const ModelDesc& m) {
    nlohmann::json j = {{"name", m.name},
                        {"family", family_name(m.family)},
                        {"vocab", m.vocab},
                        {"hidden", m.hidden},
                        {"layers", m.layers},
                        {"heads", m.heads},
                        {"kv_heads", m.kv()},
                        {"head_dim", m.head_size()},
                        {"ffn_hidden", m.ffn()},
                        {"seq", m.seq},
                        {"swiglu", m.swiglu},
                        {"rmsnorm", m.rmsnorm},
                        {"biases", m.biases},
                        {"tied_embeddings", m.tied_embeddings},
                        {"learned_positions", m.learned_positions},
                        {"params_formula", m.num_params()},
                        {"active_params_formula", m.active_params()}};
    if (m.is_moe()) {
        j["moe_experts"] = m.moe_experts;
        j["moe_topk"] = m.moe_topk;
        j["moe_every"] = m.moe_every;
    }
    return j;
}

ModelDesc engine_model(const std::string& name, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                       int64_t seq, int64_t moe_experts, int64_t moe_topk, int64_t moe_every, double capacity_factor) {
    ModelDesc m;
    m.name = name;
    m.description = "this engine's GPT (tied embeddings, RoPE, LayerNorm, GeLU MLP with biases)";
    m.family = ModelFamily::engine_gpt;
    m.vocab = vocab, m.hidden = hidden, m.layers = layers, m.heads = heads, m.seq = seq;
    m.moe_experts = moe_experts, m.moe_topk = moe_topk, m.moe_every = moe_every;
    m.moe_capacity_factor = capacity_factor;
    m.source = "assets/presets (the engine's own parameter count: common/settings/gpt_config.h)";
    return m;
}

std::string models_dir() { return assets_dir() + "/models"; }

std::vector<std::string> known_models() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(models_dir(), ec))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    // A preset named like a description file (gpt3-6.7b) is one name: the file is what --model loads.
    for (const std::string& p : list_presets())
        if (std::find(names.begin(), names.end(), p) == names.end()) names.push_back(p);
    return names;
}

ModelDesc engine_preset_model(const std::string& preset) {
    TrainConfig cfg;
    apply_preset(cfg, preset);
    const GPTConfig& g = cfg.model;
    return engine_model(preset, g.vocab, g.hidden, g.layers, g.heads, g.seq, g.moe_experts, g.moe_topk, g.moe_every,
                        cfg.moe_capacity_factor);
}

void check_model(const ModelDesc& m, const std::string& source) {
    const auto within = [&](const char* field, int64_t v, int64_t least, int64_t most) {
        US_CHECK_INPUT(v >= least && v <= most, "{}: '{}' {} must be between {} and {} (any model this tool sizes)",
                       source, field, v, least, most);
    };
    within("vocab", m.vocab, 1, model_bounds::vocab);
    within("hidden", m.hidden, 1, model_bounds::hidden);
    within("layers", m.layers, 1, model_bounds::layers);
    within("heads", m.heads, 1, model_bounds::heads);
    within("seq", m.seq, 1, model_bounds::seq);
    within("kv_heads", m.kv_heads, 0, model_bounds::heads);
    within("head_dim", m.head_dim, 0, model_bounds::hidden);
    within("ffn_hidden", m.ffn_hidden, 0, 16 * model_bounds::hidden);
    within("moe_experts", m.moe_experts, 0, model_bounds::experts);
    US_CHECK_INPUT(m.head_dim > 0 || m.hidden % m.heads == 0,
                   "{}: 'hidden' {} is not divisible by 'heads' {}: give 'head_dim' or heads that divide it", source,
                   m.hidden, m.heads);
    US_CHECK_INPUT(m.heads % m.kv() == 0, "{}: 'kv_heads' {} must divide 'heads' {} (grouped-query attention)", source,
                   m.kv(), m.heads);
    if (m.is_moe()) {
        within("moe_topk", m.moe_topk, 1, m.moe_experts);
        within("moe_every", m.moe_every, 1, m.layers);
    }
    // and the whole, counted in floating point so that it cannot wrap: the bytes of 1e15 parameters fit in 64 bits
    const double h = double(m.hidden), attention = double(m.heads * m.head_size() + 2 * m.kv_width());
    const double per_layer = 2 * h * attention + 3 * h * double(m.ffn()) * double(std::max<int64_t>(1, m.moe_experts));
    const double params = 2 * double(m.vocab) * h + double(m.layers) * per_layer;
    US_CHECK_INPUT(params <= model_bounds::params,
                   "{}: the model counts about {:.3g} parameters, beyond any model this tool sizes (at most {:.0e})",
                   source, params, model_bounds::params);
}

// A description file first, then an engine preset (gpt3-6.7b is both: `--preset gpt3-6.7b` gives the engine's GPT).
ModelDesc load_model(const std::string& spec) {
    US_CHECK_INPUT(!spec.empty(), "--model needs a name or a file");
    const bool looks_like_file = spec.find('/') != std::string::npos || (spec.size() > 5 && spec.ends_with(".json"));
    if (looks_like_file) {
        US_CHECK_INPUT(fs::exists(spec), "--model '{}': no such file", spec);
        return model_from_json(read_json_file(spec), "model file '" + spec + "'");
    }
    const std::string path = models_dir() + "/" + spec + ".json";
    if (fs::exists(path)) return model_from_json(read_json_file(path), "model file '" + path + "'");
    const std::vector<std::string> presets = list_presets();
    if (std::find(presets.begin(), presets.end(), spec) != presets.end()) return engine_preset_model(spec);
    std::string known;
    for (const std::string& n : known_models()) known += (known.empty() ? "" : ", ") + n;
    fail_user("unknown model '{}': known models are {} (or give a description file: docs/planner.md)", spec, known);
}

}  // namespace us::predict
