#include "engine/train/cli.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>

#include "engine/core/check.h"

namespace us {

namespace {

// Each flag writes into a temporary; after parsing, the flags that were given are applied on top of the
// preset and config file, in the order they were declared.
struct FlagBinder {
    CLI::App& app;
    std::vector<std::pair<CLI::Option*, std::function<void(TrainConfig&)>>> appliers;

    template <typename T, typename Apply>
    CLI::Option* option(const std::string& name, const std::string& help, Apply apply) {
        auto value = std::make_shared<T>();
        CLI::Option* opt = app.add_option(name, *value, help);
        appliers.emplace_back(opt, [value, apply](TrainConfig& c) { apply(c, *value); });
        return opt;
    }
    CLI::Option* flag(const std::string& name, const std::string& help, std::function<void(TrainConfig&)> apply) {
        CLI::Option* opt = app.add_flag(name, help);
        appliers.emplace_back(opt, std::move(apply));
        return opt;
    }
};

}  // namespace

std::function<TrainCommandLine()> add_train_flags(CLI::App& app) {
    auto binder = std::make_shared<FlagBinder>(FlagBinder{app, {}});
    auto preset = std::make_shared<std::string>();
    auto config_file = std::make_shared<std::string>();
    auto print_config = std::make_shared<bool>(false);
    FlagBinder& f = *binder;
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated flag: last wins

    app.add_option("--preset", *preset, "Model and run preset from assets/presets (tiny, small, medium, ...)");
    app.add_option("--config", *config_file, "JSON file of settings (keys are flag names, '_' for '-')");
    // model
    f.option<int>("--layers", "Transformer blocks (L)", [](TrainConfig& c, int v) { c.model.layers = v; });
    f.option<int>("--hidden", "Hidden size (C)", [](TrainConfig& c, int v) { c.model.hidden = v; });
    f.option<int>("--heads", "Attention heads (NH)", [](TrainConfig& c, int v) { c.model.heads = v; });
    f.option<int>("--vocab", "Vocabulary size (>= 256; tokens are bytes)", [](TrainConfig& c, int v) { c.model.vocab = v; });
    f.option<int>("--seq", "Sequence length (T)", [](TrainConfig& c, int v) { c.model.seq = v; });
    f.option<int>("--moe-experts", "Mixture of experts: E experts per MoE block (0: dense)",
                  [](TrainConfig& c, int v) { c.model.moe_experts = v; });
    f.option<int>("--moe-topk", "Experts per token (K)", [](TrainConfig& c, int v) { c.model.moe_topk = v; });
    f.option<int>("--moe-every", "Every M-th block is an MoE block", [](TrainConfig& c, int v) { c.model.moe_every = v; });
    f.option<double>("--moe-capacity-factor", "0: dropless; F > 0: tokens beyond ceil(tokens K / E * F) per expert dropped",
                     [](TrainConfig& c, double v) { c.moe_capacity_factor = v; });
    f.option<double>("--moe-aux-loss-coef", "Weight of the load-balancing loss E * sum f_i P_i (per sequence)",
                     [](TrainConfig& c, double v) { c.moe_aux_loss_coef = v; });
    // batch and schedule
    f.option<int>("--batch", "Micro-batch size in sequences (B)", [](TrainConfig& c, int v) { c.batch = v; });
    f.option<int>("--grad-accum", "Micro-batches per step (gradient accumulation; m for pipelines)",
                  [](TrainConfig& c, int v) { c.grad_accum = v; });
    f.option<int>("--global-batch", "Sequences per optimizer step; sets --grad-accum to it / (dp x batch)",
                  [](TrainConfig& c, int v) { c.global_batch = v; });
    f.option<int>("--steps", "Optimizer steps to run", [](TrainConfig& c, int v) { c.steps = v; });
    f.option<double>("--lr", "Peak learning rate", [](TrainConfig& c, double v) { c.adamw.lr = v; });
    f.option<int>("--warmup", "Linear warm-up steps", [](TrainConfig& c, int v) { c.warmup = v; });
    f.option<double>("--min-lr-ratio", "Cosine decay floor as a fraction of --lr",
                     [](TrainConfig& c, double v) { c.min_lr_ratio = v; });
    f.option<double>("--weight-decay", "AdamW weight decay (matrices and embedding only)",
                     [](TrainConfig& c, double v) { c.adamw.weight_decay = v; });
    f.option<double>("--grad-clip", "Global gradient-norm clipping threshold (0: off)",
                     [](TrainConfig& c, double v) { c.grad_clip = v; });
    f.option<uint64_t>("--seed", "Seed of weights and data order", [](TrainConfig& c, uint64_t v) { c.seed = v; });
    // numerics
    f.option<std::string>("--precision", "fp32 | bf16 (bf16 params/grads/activations, fp32 master + moments)",
                          [](TrainConfig& c, const std::string& v) { c.precision = parse_precision(v); });
    f.flag("--fp32-grad-accum", "With bf16: accumulate gradients in an fp32 buffer",
           [](TrainConfig& c) { c.fp32_grad_accum = true; });
    f.option<std::string>("--recompute", "Activation recomputation: none | selective | full",
                          [](TrainConfig& c, const std::string& v) { c.recompute = parse_recompute(v); });
    // io
    f.option<std::string>("--data", "Training text file (bytes are tokens); default: assets/corpus/default.txt",
                          [](TrainConfig& c, const std::string& v) { c.data = v; });
    f.option<std::string>("--save", "Write a safetensors checkpoint at the end (and every --save-every steps)",
                          [](TrainConfig& c, const std::string& v) { c.save = v; });
    f.option<int>("--save-every", "Also write --save every K steps (atomically: a killed run resumes with --load "
                                  "FILE and the same --steps, bitwise)",
                  [](TrainConfig& c, int v) { c.save_every = v; });
    f.option<std::string>("--load", "Resume from a safetensors checkpoint",
                          [](TrainConfig& c, const std::string& v) { c.load = v; });
    f.option<std::string>("--metrics-out", "Write one JSON object per step to this file",
                          [](TrainConfig& c, const std::string& v) { c.metrics_out = v; });
    f.option<int>("--threads", "CPU threads per rank (default: cores / ranks on this host)",
                  [](TrainConfig& c, int v) { c.threads = v; });
    f.option<std::string>("--device", "cpu | cuda", [](TrainConfig& c, const std::string& v) { c.device = v; });
    f.flag("--quiet", "No progress display", [](TrainConfig& c) { c.quiet = true; });
    // parallelism
    f.option<int>("--dp", "Data-parallel degree", [](TrainConfig& c, int v) { c.parallel.dp = v; });
    f.option<int>("--pp", "Pipeline-parallel degree", [](TrainConfig& c, int v) { c.parallel.pp = v; });
    f.option<int>("--tp", "Tensor-parallel degree (Megatron: heads, MLP and vocabulary split over tp ranks)",
                  [](TrainConfig& c, int v) { c.parallel.tp = v; });
    f.flag("--sp", "Sequence parallelism inside the tp group (norms, residuals on seq/tp positions; needs --tp > 1)",
           [](TrainConfig& c) { c.parallel.sp = true; });
    f.option<int>("--cp", "Context-parallel degree (ring attention over the sequence)",
                  [](TrainConfig& c, int v) { c.parallel.cp = v; });
    f.option<std::string>("--cp-balance", "zigzag | contiguous: how --cp cuts the sequence (zigzag balances causal work)",
                          [](TrainConfig& c, const std::string& v) { c.parallel.cp_balance = v; });
    f.option<int>("--ep", "Expert-parallel degree: experts spread over groups of ep data-parallel ranks (divides --dp)",
                  [](TrainConfig& c, int v) { c.parallel.ep = v; });
    f.option<int>("--zero", "ZeRO stage 0 | 1 | 2 | 3", [](TrainConfig& c, int v) { c.parallel.zero = v; });
    f.option<std::string>("--pp-schedule", "afab | 1f1b | interleaved | zb1",
                          [](TrainConfig& c, const std::string& v) { c.parallel.pp_schedule = v; });
    f.option<int>("--pp-chunks", "Virtual pipeline chunks per rank (interleaved)",
                  [](TrainConfig& c, int v) { c.parallel.pp_chunks = v; });
    f.option<double>("--bucket-mb", "Gradient bucket size in MiB", [](TrainConfig& c, double v) { c.parallel.bucket_mb = v; });
    f.flag("--no-overlap", "All-reduce gradients after backward instead of during it",
           [](TrainConfig& c) { c.parallel.overlap = false; });
    f.option<std::string>("--comm-progress", "How async collectives progress: thread | poll",
                          [](TrainConfig& c, const std::string& v) { c.parallel.comm_progress = v; });
    // profiler
    f.option<std::string>("--trace", "Write a trace file (ranks write FILE.rN parts plus the index FILE)",
                          [](TrainConfig& c, const std::string& v) { c.trace = v; });
    f.option<std::string>("--connect", "Stream the trace live to a listener at HOST:PORT",
                          [](TrainConfig& c, const std::string& v) { c.connect = v; });
    f.option<int>("--fault-kill-step", "Testing: at the start of this step, --fault-kill-rank kills itself (SIGKILL)",
                  [](TrainConfig& c, int v) { c.fault_step = v; });
    f.option<int>("--fault-kill-rank", "Testing: the rank that --fault-kill-step kills",
                  [](TrainConfig& c, int v) { c.fault_rank = v; });
    // tools
    app.add_flag("--print-config", *print_config, "Print the resolved settings as JSON and exit");

    return [binder, preset, config_file, print_config]() {
        TrainCommandLine out;
        TrainConfig& c = out.config;
        nlohmann::json file_json;
        if (!config_file->empty()) {
            std::ifstream in(*config_file);
            US_CHECK_INPUT(in.good(), "cannot read --config file '{}'", *config_file);
            try {
                file_json = nlohmann::json::parse(in);
            } catch (const nlohmann::json::exception& e) {
                fail_user("--config file '{}' is not valid JSON: {}", *config_file, e.what());
            }
            US_CHECK_INPUT(file_json.is_object(), "--config file '{}' must hold a JSON object", *config_file);
        }
        std::string preset_name = *preset;
        if (preset_name.empty() && file_json.contains("preset")) {
            US_CHECK_INPUT(file_json["preset"].is_string(), "{}: 'preset' must be a string", *config_file);
            preset_name = file_json["preset"].get<std::string>();
        }
        if (!preset_name.empty()) apply_preset(c, preset_name);
        if (!file_json.is_null()) apply_config_json(c, file_json, "--config file '" + *config_file + "'");
        for (auto& [opt, apply] : binder->appliers)
            if (opt->count() > 0) apply(c);
        c.resolve_global_batch();
        out.print_config = *print_config;
        return out;
    };
}

ParsedTrainArgs parse_train_args(int argc, const char* const* argv) {
    CLI::App app{"ultrascope-train: train the bundled GPT (one process per rank; start several with mpirun)"};
    auto build = add_train_flags(app);
    ParsedTrainArgs result;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        result.help_requested = true;
        result.help_text = app.help();
        return result;
    } catch (const CLI::ParseError& e) {
        fail_user("{} (see --help)", e.what());
    }
    result.cmd = build();
    return result;
}

}  // namespace us
