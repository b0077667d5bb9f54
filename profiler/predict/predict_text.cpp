// `ultrascope predict` as text: the model, the layout, memory per category (predicted beside the textbook's),
// compute, communication by group and the pipeline bubble.
#include <fmt/format.h>

#include <algorithm>

#include "common/core/format.h"
#include "common/core/memory_category.h"
#include "common/settings/gpt_config.h"
#include "profiler/predict/predict.h"

namespace us::predict {

std::string format_prediction(const PredictInput& in, const Prediction& p) {
    const ParallelLayout& pl = in.parallel;
    std::string s;
    if (in.moe_experts > 0)
        s += fmt::format(
            "Model: h {} v {} L {} heads {} seq {}, every {} block(s) an MoE block of E {} experts, K {} "
            "per token: N = h*v + L_dense*(12h^2 + 13h) + L_moe*(4h^2 + 8h + hE + E(8h^2 + 5h)) + 2h = {} "
            "parameters, {} active per token (K experts instead of E)\n",
            in.hidden, in.vocab, in.layers, in.heads, in.seq, in.moe_every, in.moe_experts, in.moe_topk, p.params,
            p.active_params);
    else
        s += fmt::format("Model: h {} v {} L {} heads {} seq {}: N = h*v + L*(12h^2 + 13h) + 2h = {} parameters\n",
                         in.hidden, in.vocab, in.layers, in.heads, in.seq, p.params);
    s += fmt::format(
        "Layout: dp {} pp {} tp {}{} cp {}{} ep {}, ZeRO-{}, {}, micro-batch {} x {} tokens, {} "
        "micro-batches per step, recompute {}\n",
        pl.dp, pl.pp, pl.tp, pl.sp && pl.tp > 1 ? " (sequence parallel)" : "", pl.cp,
        pl.cp > 1 ? fmt::format(" ({}, {})", cp_balance_name(pl.cp_balance), cp_comm_name(pl.cp_comm)) : std::string(),
        pl.ep, pl.zero, in.bf16 ? "bf16 mixed precision" : "fp32", in.micro_batch, in.seq, in.grad_accum,
        recompute_name(in.recompute));
    if (pl.pp > 1)
        s += fmt::format("Pipeline stage {} of {} ({} schedule)\n", in.stage, pl.pp, schedule_name(pl.pp_schedule));
    if (pl.pp > 1 || pl.tp > 1 || pl.ep > 1)
        s += fmt::format(
            "Parameters on the rank: {}{}{}\n", p.params_on_rank,
            pl.tp > 1 ? " (N_tp = h*ceil(v/tp) + L*(12h^2/tp + 7h/tp + 6h) + 2h, over its stage's layers)" : "",
            in.moe_experts > 0
                ? fmt::format(", of which its {} of {} experts per MoE block: {}", in.moe_experts / std::max(1, pl.ep),
                              in.moe_experts, p.expert_params_on_rank)
                : std::string());
    s += fmt::format("\nMemory per rank: {:>12}   {:>12}\n", "predicted", "formula");
    for (int c = 0; c < kMemCategoryCount; ++c)
        s += fmt::format("  {:<16} {:>12}   {:>12}\n", kMemCategoryNames[c],
                         p.memory[size_t(c)] ? format_bytes(*p.memory[size_t(c)]) : std::string("not modelled"),
                         p.memory_formula[size_t(c)] ? format_bytes(*p.memory_formula[size_t(c)]) : std::string("-"));
    s += fmt::format(
        "  {:<16} {:>12}   {:>12}   (sums of the categories' peaks; the runtime, libraries and "
        "communication buffers come on top: measure them with a run)\n",
        "total", format_bytes(p.memory_total()), format_bytes(p.memory_formula_total()));
    s += fmt::format(
        "  activations per {}block per micro-batch: {} ({} micro-batch(es) in flight); the textbook's "
        "{} (formula: {})\n",
        in.moe_experts > 0 ? "dense " : "", format_bytes(p.activations_per_layer), p.micro_batches_in_flight,
        format_bytes(p.activations_per_layer_formula), p.activations_formula);
    if (in.moe_experts > 0)
        s += fmt::format(
            "  activations per MoE block per micro-batch: {}, with {} expert rows as if routing were uniform "
            "(measured rows follow the router)\n",
            format_bytes(p.activations_per_moe_layer), p.moe_rows_per_layer);
    s += fmt::format(
        "\nCompute (formula): {:.1f} MFLOP per token (6N + 12*L*h*s{}), {} tokens per step, {:.2f} TFLOP per step\n",
        p.flops_per_token / 1e6, in.moe_experts > 0 ? ", N the active parameters" : "", p.tokens_per_step,
        p.flops_per_token * double(p.tokens_per_step) / 1e12);
    s += fmt::format(
        "Communication sent per rank per step (predicted, ring algorithms): data parallel {}, pipeline {}, "
        "tensor parallel {}, context parallel {}{}{}\n",
        format_bytes(p.comm_bytes[size_t(prof::GroupKind::dp)]),
        format_bytes(p.comm_bytes[size_t(prof::GroupKind::pp)]),
        format_bytes(p.comm_bytes[size_t(prof::GroupKind::tp)]),
        format_bytes(p.comm_bytes[size_t(prof::GroupKind::cp)]),
        p.comm_bytes[size_t(prof::GroupKind::embedding)] > 0
            ? fmt::format(", the tied embedding's gradient between the first and last stages {}",
                          format_bytes(p.comm_bytes[size_t(prof::GroupKind::embedding)]))
            : std::string(),
        pl.ep > 1 ? fmt::format(", expert parallel {} (uniform routing; the textbook's 4 all-to-alls of "
                                "K*b*s*h*(ep-1)/ep per MoE block: {}), experts' gradients {}",
                                format_bytes(p.comm_bytes[size_t(prof::GroupKind::ep)]),
                                format_bytes(p.ep_comm_bytes_formula),
                                format_bytes(p.comm_bytes[size_t(prof::GroupKind::edp)]))
                  : std::string());
    if (pl.zero >= 3 && pl.dp > 1) {  // the textbook beside the engine's walk of its gathers [S4]
        const double K = double(p.params_on_rank) * (in.bf16 ? 2.0 : 4.0);
        s += fmt::format(
            "  ZeRO-3's data parallel by the textbook (a reduce-scatter and two all-gathers of K per micro-batch, 3 m K "
            "(dp-1)/dp; formula): {}; the engine gathers a bucket again for each unit that uses it and the tied "
            "embedding again for the head (predicted above)\n",
            format_bytes(int64_t(3.0 * double(in.grad_accum) * K * double(pl.dp - 1) / double(pl.dp))));
    }
    if (pl.tp > 1)
        s += fmt::format(
            "  tensor parallel by the textbook (4 all-reduces of s*b*h per block per micro-batch): {}; "
            "the engine adds the embedding, the head, the vocabulary-parallel loss{}\n",
            format_bytes(p.tp_comm_bytes_formula),
            pl.sp ? ", the re-gathered LayerNorm outputs and the replicated gradients" : "");
    s += fmt::format("Pipeline bubble (formula): {:.3f} = {}", p.bubble_theory, p.bubble_formula);
    if (pl.pp > 1) s += fmt::format("; predicted {:.3f} on this stage by simulating the schedule", p.bubble_simulated);
    s += "\n";
    return s;
}

}  // namespace us::predict
