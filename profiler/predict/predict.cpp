// predict(): a configuration's figures without running anything, in named steps: the parameters (whole and on the
// rank), the rank's place (RankContext), then memory (predict_memory.cpp), FLOPs and tokens, communication
// (predict_comm.cpp) and the pipeline bubble. Also the config JSON's reading into PredictInput.
#include "profiler/predict/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/core/check.h"
#include "common/settings/settings_schema.h"
#include "profiler/predict/predict_shape.h"

namespace us::predict {

namespace {

// N = h*v + L_dense*(12h^2 + 13h) + L_moe*(4h^2 + 8h + hE + E(8h^2 + 5h)) + 2h; active: K experts for E. On the
// rank, N_tp = h*ceil(v/tp) + L*(12h^2/tp + 7h/tp + 6h) + 2h: the block matrices and the column-parallel biases split,
// the LayerNorms and row-parallel biases whole, the vocabulary padded to a multiple of tp. An MoE block keeps the
// attention's 4h^2/tp + 3h/tp + 5h and the router's hE whole; each of its E/ep experts 8h^2/tp + 4h/tp + h.
void predict_params(const PredictInput& in, const RankShape& r, Prediction& p) {
    const int64_t h = in.hidden, v = in.vocab, L = in.layers, tp = r.tp;
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < L; ++l) moe_layers += is_moe_layer(in, l);
    const int64_t expert = 8 * h * h + 5 * h, moe_block = 4 * h * h + 8 * h + h * in.moe_experts;
    p.params =
        h * v + (L - moe_layers) * (12 * h * h + 13 * h) + moe_layers * (moe_block + in.moe_experts * expert) + 2 * h;
    p.active_params = p.params - moe_layers * (in.moe_experts - in.moe_topk) * expert;
    const bool first = in.stage == 0, last = in.stage == in.parallel.pp - 1;
    const int64_t Ls = layers_on_stage(in), Lm = moe_layers_on_stage(in);
    const int64_t block_params = (Ls - Lm) * (12 * h * h / tp + 7 * h / tp + 6 * h) +
                                 Lm * (4 * h * h / tp + 3 * h / tp + 5 * h + h * in.moe_experts);
    p.expert_params_on_rank = Lm * (in.moe_experts / r.ep) * (8 * h * h / tp + 4 * h / tp + h);
    p.params_on_rank = block_params + (first || last ? h * r.Vr : 0) + (last ? 2 * h : 0) + p.expert_params_on_rank;
}

RankContext rank_context(const PredictInput& in, const Prediction& p) {
    RankContext rc;
    rc.r = rank_shape(in);
    rc.e = in.bf16 ? 2 : 4;
    rc.first = in.stage == 0, rc.last = in.stage == in.parallel.pp - 1;
    rc.Ls = layers_on_stage(in), rc.Lm = moe_layers_on_stage(in);
    rc.n = p.params_on_rank - p.expert_params_on_rank, rc.nx = p.expert_params_on_rank;
    // The data-parallel reduction and ZeRO run over dp x cp ranks (cp ranks hold partial gradients of the same
    // parameters); an MoE block's experts over the dp/ep x cp ranks that hold the same experts.
    rc.dp = int64_t(in.parallel.dp) * std::max(1, in.parallel.cp),
    rc.edp = int64_t(in.parallel.dp / rc.r.ep) * std::max(1, in.parallel.cp);
    return rc;
}

void predict_bubble(const PredictInput& in, Prediction& p) {
    const double pp = double(in.parallel.pp), m = double(in.grad_accum);
    if (in.parallel.pp <= 1) {
        p.bubble_theory = 0;
        p.bubble_formula = "no pipeline";
    } else if (in.parallel.pp_schedule == PipelineSchedule::interleaved) {
        p.bubble_theory = (pp - 1) / (double(in.parallel.pp_chunks) * m);
        p.bubble_formula = "(pp - 1) / (v m)";
    } else if (in.parallel.pp_schedule == PipelineSchedule::zb1) {
        p.bubble_theory = (pp - 1) / (3.0 * m);
        p.bubble_formula = "about (pp - 1) / (3 m) (ZB-H1)";
    } else {
        p.bubble_theory = (pp - 1) / m;
        p.bubble_formula = "(pp - 1) / m";
    }
}

}  // namespace

int64_t uniform_kept_rows(const PredictInput& in, int64_t n) {
    const int64_t choices = n * in.moe_topk;
    if (in.moe_capacity_factor <= 0 || in.moe_experts == 0) return choices;
    const int64_t capacity =
        int64_t(std::ceil(double(n) * double(in.moe_topk) / double(in.moe_experts) * in.moe_capacity_factor));
    return std::min(choices, in.moe_experts * capacity);
}

RankShape rank_shape(const PredictInput& in, int64_t layer, const std::vector<double>* load) {
    RankShape r;
    r.tp = std::max(1, in.parallel.tp);
    r.cp = std::max(1, in.parallel.cp);
    r.sp = in.parallel.sp && r.tp > 1;
    r.flash = in.flash;
    r.T = in.seq / r.cp;  // the rank's positions of a sequence
    r.N = in.micro_batch * r.T;
    r.R = r.sp ? r.N / r.tp : r.N;
    r.C = in.hidden;
    r.Ca = in.hidden / r.tp;
    r.F = 4 * in.hidden / r.tp;
    r.Vr = (in.vocab + r.tp - 1) / r.tp;
    r.heads = in.heads / r.tp;
    r.ep = std::max(1, in.parallel.ep);
    r.E = in.moe_experts, r.K = in.moe_topk;
    r.X = uniform_kept_rows(in, r.N);  // the rank's kept choices; uniform routing sends as many back
    r.Xe = r.X;
    if (!load) load = &in.moe_expert_load;
    if (r.ep > 1 && layer >= 0 && size_t(layer) < load->size())
        r.Xe = int64_t(std::llround(double(r.X) * (*load)[size_t(layer)]));
    ActivationShape& a = r.act;
    a.B = int(in.micro_batch), a.T = int(r.T), a.C = int(in.hidden), a.NH = int(in.heads), a.V = int(r.Vr);
    a.tp = r.tp, a.cp = r.cp, a.flash = r.flash, a.sp = r.sp;
    a.E = int(r.E), a.K = int(r.K);
    a.dtype = in.bf16 ? DType::bf16 : DType::f32;
    return r;
}

PredictInput PredictInput::from_settings(const TrainConfig& c) {
    PredictInput in;
    in.vocab = c.model.vocab, in.hidden = c.model.hidden, in.layers = c.model.layers, in.heads = c.model.heads;
    in.seq = c.model.seq;
    in.moe_experts = c.model.moe_experts, in.moe_topk = c.model.moe_topk, in.moe_every = c.model.moe_every;
    in.moe_capacity_factor = c.moe_capacity_factor;
    in.micro_batch = c.batch, in.grad_accum = c.grad_accum;
    in.bf16 = c.precision == Precision::bf16;
    in.fp32_grad_accum = c.fp32_grad_accum;
    in.recompute = c.recompute;
    in.flash = attention_blockwise(c.attention);
    in.cuda = c.device == "cuda";
    in.parallel = c.parallel;
    return in;
}

PredictInput PredictInput::from_config(const nlohmann::json& c) {
    const TrainConfig cfg = settings_from_json(c, "the run's settings");
    // A trace's settings come from a file: every size and degree a figure divides by is checked first (0 heads or
    // tp in a damaged trace ended the report with SIGFPE). Not the engine's other rules: the planner's own
    // predicted traces model shapes the engine would not train (a vocabulary under 256).
    const GPTConfig& m = cfg.model;
    const ParallelLayout& p = cfg.parallel;
    const std::pair<const char*, int64_t> sizes[] = {{"vocab", m.vocab},
                                                     {"hidden", m.hidden},
                                                     {"layers", m.layers},
                                                     {"heads", m.heads},
                                                     {"seq", m.seq},
                                                     {"batch", cfg.batch},
                                                     {"grad_accum", cfg.grad_accum},
                                                     {"dp", p.dp},
                                                     {"tp", p.tp},
                                                     {"pp", p.pp},
                                                     {"cp", p.cp},
                                                     {"ep", p.ep}};
    for (const auto& [key, v] : sizes)
        US_CHECK_INPUT(v > 0, "the run's settings say {} {}: the file is damaged or not a run of this engine", key, v);
    US_CHECK_INPUT(m.moe_experts == 0 || (m.moe_every > 0 && m.moe_topk > 0),
                   "the run's settings say {} experts every {} block(s), top-{}: the file is damaged or not a run of "
                   "this engine",
                   m.moe_experts, m.moe_every, m.moe_topk);
    return from_settings(cfg);
}

int64_t Prediction::memory_total() const {
    int64_t t = 0;
    for (const auto& m : memory) t += m.value_or(0);
    return t;
}

std::array<bool, kMemCategoryCount> Prediction::modelled_categories() const {
    std::array<bool, kMemCategoryCount> modelled{};
    for (size_t k = 0; k < memory.size(); ++k) modelled[k] = memory[k].has_value();
    return modelled;
}

int64_t Prediction::memory_formula_total() const {
    int64_t t = 0;
    for (const auto& m : memory_formula) t += m.value_or(0);
    return t;
}

Prediction predict(const PredictInput& in) {
    Prediction p;
    predict_params(in, rank_shape(in), p);
    const RankContext rc = rank_context(in, p);
    predict_model_states(in, rc, p);
    predict_activations(in, rc, p);
    p.flops_per_token = 6.0 * double(p.active_params) + 12.0 * double(in.layers * in.hidden * in.seq);
    p.tokens_per_step = in.micro_batch * in.grad_accum * in.seq * in.parallel.dp;
    predict_communication(in, rc, p);
    predict_bubble(in, p);
    return p;
}

}  // namespace us::predict
