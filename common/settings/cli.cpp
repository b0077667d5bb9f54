#include "common/settings/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <type_traits>

#include "common/core/check.h"

namespace us {

namespace {

// The one table of training flags. Each flag names the TrainConfig field it sets (an accessor returning a
// reference, generic so that it also reads a const config), so the same entry parses the flag and writes it back
// (train_args_of). Parsing writes into a temporary; after parsing, the flags that were given are applied on top of
// the preset and config file, in the order they were declared.
struct FlagBinder {
    CLI::App& app;
    std::vector<std::pair<CLI::Option*, std::function<void(TrainConfig&)>>> appliers;
    // Writing back: the flag's name, and its arguments for a config over a base (none when the flag is not needed:
    // the value is the base's).
    std::vector<std::pair<std::string, std::function<std::vector<std::string>(const TrainConfig&, const TrainConfig&)>>>
        writers;

    template <typename T, typename Field>
    CLI::Option* option(const std::string& name, const std::string& help, Field field) {
        auto value = std::make_shared<T>();
        CLI::Option* opt = app.add_option(name, *value, help);
        appliers.emplace_back(opt, [value, field](TrainConfig& c) { field(c) = *value; });
        writers.emplace_back(name, [name, field](const TrainConfig& c, const TrainConfig& base) {
            const T v = field(c);
            if (v == field(base)) return std::vector<std::string>{};
            if constexpr (std::is_same_v<T, std::string>) return std::vector<std::string>{name, v};
            else return std::vector<std::string>{name, fmt::format("{}", v)};
        });
        return opt;
    }
    // A value kept in the config as an enum: parsed from and named back to its text.
    template <typename E, typename Field, typename Parse, typename Name>
    CLI::Option* named(const std::string& name, const std::string& help, Field field, Parse parse, Name to_name) {
        auto value = std::make_shared<std::string>();
        CLI::Option* opt = app.add_option(name, *value, help);
        appliers.emplace_back(opt, [value, field, parse](TrainConfig& c) { field(c) = parse(*value); });
        writers.emplace_back(name, [name, field, to_name](const TrainConfig& c, const TrainConfig& base) {
            const E v = field(c);
            if (v == field(base)) return std::vector<std::string>{};
            return std::vector<std::string>{name, std::string(to_name(v))};
        });
        return opt;
    }
    // A switch: giving it sets the field to `when_given` (true for --sp, false for --no-overlap).
    template <typename Field>
    CLI::Option* flag(const std::string& name, const std::string& help, Field field, bool when_given = true) {
        CLI::Option* opt = app.add_flag(name, help);
        appliers.emplace_back(opt, [field, when_given](TrainConfig& c) { field(c) = when_given; });
        writers.emplace_back(name, [name, field, when_given](const TrainConfig& c, const TrainConfig& base) {
            const bool v = field(c);
            if (v == field(base)) return std::vector<std::string>{};
            US_CHECK_INPUT(v == when_given, "{} cannot undo a setting of the preset", name);
            return std::vector<std::string>{name};
        });
        return opt;
    }
};

void declare_flags(FlagBinder& f) {
    // model
    f.option<int>("--layers", "Transformer blocks (L)", [](auto& c) -> auto& { return c.model.layers; });
    f.option<int>("--hidden", "Hidden size (C)", [](auto& c) -> auto& { return c.model.hidden; });
    f.option<int>("--heads", "Attention heads (NH)", [](auto& c) -> auto& { return c.model.heads; });
    f.option<int>("--vocab", "Vocabulary size (>= 256; tokens are bytes)", [](auto& c) -> auto& { return c.model.vocab; });
    f.option<int>("--seq", "Sequence length (T)", [](auto& c) -> auto& { return c.model.seq; });
    f.option<int>("--moe-experts", "Mixture of experts: E experts per MoE block (0: dense)",
                  [](auto& c) -> auto& { return c.model.moe_experts; });
    f.option<int>("--moe-topk", "Experts per token (K)", [](auto& c) -> auto& { return c.model.moe_topk; });
    f.option<int>("--moe-every", "Every M-th block is an MoE block", [](auto& c) -> auto& { return c.model.moe_every; });
    f.option<double>("--moe-capacity-factor", "0: dropless; F > 0: tokens beyond ceil(tokens K / E * F) per expert dropped",
                     [](auto& c) -> auto& { return c.moe_capacity_factor; });
    f.option<double>("--moe-aux-loss-coef", "Weight of the load-balancing loss E * sum f_i P_i (per sequence)",
                     [](auto& c) -> auto& { return c.moe_aux_loss_coef; });
    // batch and schedule
    f.option<int>("--batch", "Micro-batch size in sequences (B)", [](auto& c) -> auto& { return c.batch; });
    f.option<int>("--grad-accum", "Micro-batches per step (gradient accumulation; m for pipelines)",
                  [](auto& c) -> auto& { return c.grad_accum; });
    f.option<int>("--global-batch", "Sequences per optimizer step; sets --grad-accum to it / (dp x batch)",
                  [](auto& c) -> auto& { return c.global_batch; });
    f.option<int>("--steps", "Optimizer steps to run", [](auto& c) -> auto& { return c.steps; });
    f.option<double>("--lr", "Peak learning rate", [](auto& c) -> auto& { return c.adamw.lr; });
    f.option<int>("--warmup", "Linear warm-up steps", [](auto& c) -> auto& { return c.warmup; });
    f.option<double>("--min-lr-ratio", "Cosine decay floor as a fraction of --lr",
                     [](auto& c) -> auto& { return c.min_lr_ratio; });
    f.option<double>("--weight-decay", "AdamW weight decay (matrices and embedding only)",
                     [](auto& c) -> auto& { return c.adamw.weight_decay; });
    f.option<double>("--grad-clip", "Global gradient-norm clipping threshold (0: off)",
                     [](auto& c) -> auto& { return c.grad_clip; });
    f.option<uint64_t>("--seed", "Seed of weights and data order", [](auto& c) -> auto& { return c.seed; });
    // numerics
    f.named<Precision>("--precision", "fp32 | bf16 (bf16 params/grads/activations, fp32 master + moments)",
                       [](auto& c) -> auto& { return c.precision; }, parse_precision, precision_name);
    f.flag("--fp32-grad-accum", "With bf16: accumulate gradients in an fp32 buffer",
           [](auto& c) -> auto& { return c.fp32_grad_accum; });
    f.named<Recompute>("--recompute", "Activation recomputation: none | selective | full",
                       [](auto& c) -> auto& { return c.recompute; }, parse_recompute, recompute_name);
    f.named<Attention>("--attention", "naive (stores the s x s probabilities) | flash (blockwise online softmax: keeps "
                                      "a log-sum-exp per row, recomputes the scores in backward)",
                       [](auto& c) -> auto& { return c.attention; }, parse_attention, attention_name);
    // io
    f.option<std::string>("--data", "Training text file (bytes are tokens); default: assets/corpus/default.txt",
                          [](auto& c) -> auto& { return c.data; });
    f.option<std::string>("--save", "Write a safetensors checkpoint at the end (and every --save-every steps)",
                          [](auto& c) -> auto& { return c.save; });
    f.option<int>("--save-every", "Also write --save every K steps (atomically: a killed run resumes with --load "
                                  "FILE and the same --steps, bitwise)",
                  [](auto& c) -> auto& { return c.save_every; });
    f.option<std::string>("--load", "Resume from a safetensors checkpoint",
                          [](auto& c) -> auto& { return c.load; });
    f.option<std::string>("--metrics-out", "Write one JSON object per step to this file",
                          [](auto& c) -> auto& { return c.metrics_out; });
    f.option<int>("--threads", "CPU threads per rank (default: cores / ranks on this host)",
                  [](auto& c) -> auto& { return c.threads; });
    f.option<std::string>("--device", "cpu | cuda", [](auto& c) -> auto& { return c.device; });
    f.flag("--quiet", "No progress display", [](auto& c) -> auto& { return c.quiet; });
    // parallelism
    f.option<int>("--dp", "Data-parallel degree", [](auto& c) -> auto& { return c.parallel.dp; });
    f.option<int>("--pp", "Pipeline-parallel degree", [](auto& c) -> auto& { return c.parallel.pp; });
    f.option<int>("--tp", "Tensor-parallel degree (Megatron: heads, MLP and vocabulary split over tp ranks)",
                  [](auto& c) -> auto& { return c.parallel.tp; });
    f.flag("--sp", "Sequence parallelism inside the tp group (norms, residuals on seq/tp positions; needs --tp > 1)",
           [](auto& c) -> auto& { return c.parallel.sp; });
    f.option<int>("--cp", "Context-parallel degree (ring attention over the sequence)",
                  [](auto& c) -> auto& { return c.parallel.cp; });
    f.option<std::string>("--cp-balance", "zigzag | contiguous: how --cp cuts the sequence (zigzag balances causal work)",
                          [](auto& c) -> auto& { return c.parallel.cp_balance; });
    f.option<int>("--ep", "Expert-parallel degree: experts spread over groups of ep data-parallel ranks (divides --dp)",
                  [](auto& c) -> auto& { return c.parallel.ep; });
    f.option<int>("--zero", "ZeRO stage 0 | 1 | 2 | 3", [](auto& c) -> auto& { return c.parallel.zero; });
    f.option<std::string>("--pp-schedule", "afab | 1f1b | interleaved | zb1",
                          [](auto& c) -> auto& { return c.parallel.pp_schedule; });
    f.option<int>("--pp-chunks", "Virtual pipeline chunks per rank (interleaved)",
                  [](auto& c) -> auto& { return c.parallel.pp_chunks; });
    f.option<double>("--bucket-mb", "Gradient bucket size in MiB", [](auto& c) -> auto& { return c.parallel.bucket_mb; });
    f.flag("--no-overlap", "All-reduce gradients after backward instead of during it",
           [](auto& c) -> auto& { return c.parallel.overlap; }, false);
    f.option<std::string>("--comm-progress", "How async collectives progress: thread | poll",
                          [](auto& c) -> auto& { return c.parallel.comm_progress; });
    // profiler
    f.option<std::string>("--trace", "Write a trace file (ranks write FILE.rN parts plus the index FILE)",
                          [](auto& c) -> auto& { return c.trace; });
    f.option<std::string>("--connect", "Stream the trace live to a listener at HOST:PORT",
                          [](auto& c) -> auto& { return c.connect; });
    f.option<int>("--fault-kill-step", "Testing: at the start of this step, --fault-kill-rank kills itself (SIGKILL)",
                  [](auto& c) -> auto& { return c.fault_step; });
    f.option<int>("--fault-kill-rank", "Testing: the rank that --fault-kill-step kills",
                  [](auto& c) -> auto& { return c.fault_rank; });
}

}  // namespace

std::function<TrainCommandLine()> add_train_flags(CLI::App& app) {
    auto binder = std::make_shared<FlagBinder>(FlagBinder{app, {}, {}});
    auto preset = std::make_shared<std::string>();
    auto config_file = std::make_shared<std::string>();
    auto print_config = std::make_shared<bool>(false);
    FlagBinder& f = *binder;
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated flag: last wins

    app.add_option("--preset", *preset, "Model and run preset from assets/presets (tiny, small, medium, ...)");
    app.add_option("--config", *config_file, "JSON file of settings (keys are flag names, '_' for '-')");
    declare_flags(f);
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

std::vector<std::string> train_args_of(const TrainConfig& config, const TrainConfig& base) {
    CLI::App app;
    FlagBinder f{app, {}, {}};
    declare_flags(f);
    std::vector<std::string> args;
    for (const auto& [name, write] : f.writers) {
        const auto part = write(config, base);
        args.insert(args.end(), part.begin(), part.end());
    }
    return args;
}

std::vector<std::string> train_flag_names() {
    CLI::App app;
    FlagBinder f{app, {}, {}};
    declare_flags(f);
    std::vector<std::string> names;
    for (const auto& w : f.writers) names.push_back(w.first);
    return names;
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
