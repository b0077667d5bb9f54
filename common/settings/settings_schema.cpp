// The table of training settings (settings_schema.h). Each entry names the TrainConfig member it reads and writes
// through an accessor returning a reference, so the same entry serves the flag, the JSON key and the writer back.
#include "common/settings/settings_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

#include "common/core/check.h"

namespace us {

namespace {

// One entry. `field` is a generic lambda returning a reference to the member of a (const or not) TrainConfig.
template <typename Field>
Setting entry(std::string_view flag, std::string_view key, std::string_view help, SettingKind kind, Field field,
              InJson json = InJson::written) {
    Setting s;
    s.flag = flag, s.key = key, s.help = help, s.kind = kind, s.json = json;
    s.get = [field](const TrainConfig& c) { return nlohmann::json(field(c)); };
    s.set = [field](TrainConfig& c, const nlohmann::json& v) {
        using T = std::remove_reference_t<decltype(field(c))>;
        if constexpr (std::is_same_v<T, uint64_t>)
            field(c) = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
        else if constexpr (std::is_same_v<T, int>)
            field(c) = int(v.get<int64_t>());
        else
            field(c) = v.get<T>();
    };
    return s;
}

// An enum member kept as its name: parsed from and named back to its text.
template <typename Field, typename Parse, typename Name>
Setting named(std::string_view flag, std::string_view key, std::string_view help, Field field, Parse parse,
              Name to_name, std::vector<std::string_view> choices) {
    Setting s;
    s.flag = flag, s.key = key, s.help = help, s.kind = SettingKind::choice, s.choices = std::move(choices);
    s.get = [field, to_name](const TrainConfig& c) { return nlohmann::json(std::string(to_name(field(c)))); };
    s.set = [field, parse](TrainConfig& c, const nlohmann::json& v) { field(c) = parse(v.get<std::string>()); };
    return s;
}

// An enum member with a name table (common/core/enum_names.h): the choices and both directions are the table's.
template <typename Field, typename E, size_t N>
Setting named(std::string_view flag, std::string_view key, std::string_view help, Field field,
              const EnumTable<E, N>& table) {
    return named(
        flag, key, help, field, [&table, flag](std::string_view text) { return parse_enum(table, text, flag); },
        [&table](E v) { return enum_name(table, v); }, enum_names(table));
}

Setting text(std::string_view flag, std::string_view key, std::string_view help, auto field,
             std::vector<std::string_view> choices = {}, InJson json = InJson::written) {
    Setting s = entry(flag, key, help, SettingKind::text, field, json);
    s.choices = std::move(choices);
    return s;
}

Setting toggle(std::string_view flag, std::string_view key, std::string_view help, auto field, bool switch_value = true,
               InJson json = InJson::written) {
    Setting s = entry(flag, key, help, SettingKind::boolean, field, json);
    s.switch_value = switch_value;
    return s;
}

// A setting that does something only in some configurations.
Setting only_when(Setting s, std::function<bool(const TrainConfig&)> applies) {
    s.applies = std::move(applies);
    return s;
}

bool has_experts(const TrainConfig& c) { return c.model.moe_experts > 0; }

constexpr auto I = SettingKind::integer;
constexpr auto D = SettingKind::number;

std::vector<Setting> build_schema() {
    std::vector<Setting> t;
    // model
    t.push_back(entry(
        "--layers", "layers", "Transformer blocks (L)", I, [](auto& c) -> auto& { return c.model.layers; }));
    t.push_back(entry(
        "--hidden", "hidden", "Hidden size (C)", I, [](auto& c) -> auto& { return c.model.hidden; }));
    t.push_back(entry(
        "--heads", "heads", "Attention heads (NH)", I, [](auto& c) -> auto& { return c.model.heads; }));
    t.push_back(entry(
        "--vocab", "vocab", "Vocabulary size (>= 256; tokens are bytes)", I,
        [](auto& c) -> auto& { return c.model.vocab; }));
    t.push_back(entry(
        "--seq", "seq", "Sequence length (T)", I, [](auto& c) -> auto& { return c.model.seq; }));
    t.push_back(entry(
        "--moe-experts", "moe_experts", "Mixture of experts: E experts per MoE block (0: dense)", I,
        [](auto& c) -> auto& { return c.model.moe_experts; }));
    t.push_back(only_when(
        entry(
            "--moe-topk", "moe_topk", "Experts per token (K)", I, [](auto& c) -> auto& { return c.model.moe_topk; }),
        has_experts));
    t.push_back(only_when(entry(
                              "--moe-every", "moe_every", "Every M-th block is an MoE block", I,
                              [](auto& c) -> auto& { return c.model.moe_every; }),
                          has_experts));
    t.push_back(only_when(entry(
                              "--moe-capacity-factor", "moe_capacity_factor",
                              "0: dropless; F > 0: tokens beyond ceil(tokens K / E * F) per expert dropped", D,
                              [](auto& c) -> auto& { return c.moe_capacity_factor; }),
                          has_experts));
    t.push_back(only_when(entry(
                              "--moe-aux-loss-coef", "moe_aux_loss_coef",
                              "Weight of the load-balancing loss E * sum f_i P_i (per sequence)", D,
                              [](auto& c) -> auto& { return c.moe_aux_loss_coef; }),
                          has_experts));
    // batch and schedule
    t.push_back(entry(
        "--batch", "batch", "Micro-batch size in sequences (B)", I, [](auto& c) -> auto& { return c.batch; }));
    t.push_back(entry(
        "--grad-accum", "grad_accum", "Micro-batches per step (gradient accumulation; m for pipelines)", I,
        [](auto& c) -> auto& { return c.grad_accum; }));
    t.push_back(entry(
        "--global-batch", "global_batch", "Sequences per optimizer step; sets --grad-accum to it / (dp x batch)", I,
        [](auto& c) -> auto& { return c.global_batch; }, InJson::read_only));
    t.push_back(entry(
        "--steps", "steps", "Optimizer steps to run", I, [](auto& c) -> auto& { return c.steps; }));
    t.push_back(entry(
        "--lr", "lr", "Peak learning rate", D, [](auto& c) -> auto& { return c.adamw.lr; }));
    t.push_back(entry(
        "--warmup", "warmup", "Linear warm-up steps", I, [](auto& c) -> auto& { return c.warmup; }));
    t.push_back(entry(
        "--min-lr-ratio", "min_lr_ratio", "Cosine decay floor as a fraction of --lr", D,
        [](auto& c) -> auto& { return c.min_lr_ratio; }));
    t.push_back(entry(
        "--weight-decay", "weight_decay", "AdamW weight decay (matrices and embedding only)", D,
        [](auto& c) -> auto& { return c.adamw.weight_decay; }));
    t.push_back(entry(
        "--grad-clip", "grad_clip", "Global gradient-norm clipping threshold (0: off)", D,
        [](auto& c) -> auto& { return c.grad_clip; }));
    t.push_back(entry(
        "--seed", "seed", "Seed of weights and data order", SettingKind::unsigned_integer,
        [](auto& c) -> auto& { return c.seed; }));
    // numerics
    t.push_back(named("--precision", "precision", "fp32 | bf16 (bf16 params/grads/activations, fp32 master + moments)",
                      [](auto& c) -> auto& { return c.precision; }, parse_precision, precision_name, {"fp32", "bf16"}));
    t.push_back(toggle(
        "--fp32-grad-accum", "fp32_grad_accum", "With bf16: accumulate gradients in an fp32 buffer",
        [](auto& c) -> auto& { return c.fp32_grad_accum; }));
    t.push_back(named("--recompute", "recompute", "Activation recomputation: none | selective | full",
                      [](auto& c) -> auto& { return c.recompute; }, parse_recompute, recompute_name,
                      {"none", "selective", "full"}));
    t.push_back(named("--attention", "attention",
                      "naive (stores the s x s probabilities) | flash (blockwise online softmax: keeps a log-sum-exp "
                      "per row, recomputes the scores in backward) | cudnn (flash through cuDNN's fused attention: "
                      "--device cuda, bf16, one context-parallel rank)",
                      [](auto& c) -> auto& { return c.attention; }, parse_attention, attention_name,
                      {"naive", "flash", "cudnn"}));
    // io
    t.push_back(text(
        "--data", "data", "Training text file (bytes are tokens); default: assets/corpus/default.txt",
        [](auto& c) -> auto& { return c.data; }));
    t.push_back(text(
        "--save", "save", "Write a safetensors checkpoint at the end (and every --save-every steps)",
        [](auto& c) -> auto& { return c.save; }, {}, InJson::no));
    t.push_back(only_when(entry(
                              "--save-every", "save_every",
                              "Also write --save every K steps (atomically: a killed run resumes with --load FILE "
                              "and the same --steps, bitwise)",
                              I, [](auto& c) -> auto& { return c.save_every; }, InJson::no),
                          [](const TrainConfig& c) { return !c.save.empty(); }));
    t.push_back(text(
        "--load", "load", "Resume from a safetensors checkpoint", [](auto& c) -> auto& { return c.load; }, {},
        InJson::no));
    t.push_back(text(
        "--metrics-out", "metrics_out", "Write one JSON object per step to this file",
        [](auto& c) -> auto& { return c.metrics_out; }, {}, InJson::no));
    t.push_back(entry(
        "--threads", "threads", "CPU threads per rank (default: cores / ranks on this host)", I,
        [](auto& c) -> auto& { return c.threads; }));
    t.push_back(text("--device", "device", "cpu | cuda", [](auto& c) -> auto& { return c.device; }, {"cpu", "cuda"}));
    t.push_back(toggle(
        "--quiet", "quiet", "No progress display", [](auto& c) -> auto& { return c.quiet; }, true, InJson::no));
    // parallelism
    t.push_back(entry(
        "--dp", "dp", "Data-parallel degree", I, [](auto& c) -> auto& { return c.parallel.dp; }));
    t.push_back(entry(
        "--pp", "pp", "Pipeline-parallel degree", I, [](auto& c) -> auto& { return c.parallel.pp; }));
    t.push_back(entry(
        "--tp", "tp", "Tensor-parallel degree (Megatron: heads, MLP and vocabulary split over tp ranks)", I,
        [](auto& c) -> auto& { return c.parallel.tp; }));
    t.push_back(only_when(toggle(
                              "--sp", "sp",
                              "Sequence parallelism inside the tp group (norms, residuals on seq/tp positions; "
                              "needs --tp > 1)",
                              [](auto& c) -> auto& { return c.parallel.sp; }),
                          [](const TrainConfig& c) { return c.parallel.tp > 1; }));
    t.push_back(entry(
        "--cp", "cp", "Context-parallel degree (attention over the sequence split over cp ranks)", I,
        [](auto& c) -> auto& { return c.parallel.cp; }));
    t.push_back(only_when(named(
                              "--cp-balance", "cp_balance",
                              "zigzag | contiguous: how --cp cuts the sequence (zigzag balances causal work)",
                              [](auto& c) -> auto& { return c.parallel.cp_balance; }, kCpBalances),
                          [](const TrainConfig& c) { return c.parallel.cp > 1; }));
    t.push_back(only_when(named(
                              "--cp-comm", "cp_comm",
                              "ring | allgather: how --cp moves keys and values (ring: passed on behind the "
                              "attention; allgather: gathered whole before it, Llama 3's)",
                              [](auto& c) -> auto& { return c.parallel.cp_comm; }, kCpComms),
                          [](const TrainConfig& c) { return c.parallel.cp > 1; }));
    t.push_back(only_when(entry(
                              "--ep", "ep",
                              "Expert-parallel degree: experts spread over groups of ep data-parallel ranks "
                              "(divides --dp)",
                              I, [](auto& c) -> auto& { return c.parallel.ep; }),
                          has_experts));
    t.push_back(entry(
        "--zero", "zero", "ZeRO stage 0 | 1 | 2 | 3", I, [](auto& c) -> auto& { return c.parallel.zero; }));
    static const std::string schedules = enum_names_text(kPipelineSchedules, " | ");
    t.push_back(only_when(named(
                              "--pp-schedule", "pp_schedule", schedules,
                              [](auto& c) -> auto& { return c.parallel.pp_schedule; }, kPipelineSchedules),
                          [](const TrainConfig& c) { return c.parallel.pp > 1; }));
    t.push_back(only_when(entry(
                              "--pp-chunks", "pp_chunks", "Virtual pipeline chunks per rank (interleaved)", I,
                              [](auto& c) -> auto& { return c.parallel.pp_chunks; }),
                          [](const TrainConfig& c) {
                              return c.parallel.pp > 1 && c.parallel.pp_schedule == PipelineSchedule::interleaved;
                          }));
    t.push_back(entry(
        "--bucket-mb", "bucket_mb", "Gradient bucket size in MiB", D,
        [](auto& c) -> auto& { return c.parallel.bucket_mb; }));
    t.push_back(toggle(
        "--no-overlap", "overlap", "All-reduce gradients after backward instead of during it",
        [](auto& c) -> auto& { return c.parallel.overlap; }, false));
    t.push_back(only_when(
        toggle(
            "--overlap-alternate", "overlap_alternate",
            "Overlap the gradient all-reduce in every other step only, the others after backward (one run shows "
            "what overlap costs the compute beside it; `ultrascope calibrate --nodes` measures it so)",
            [](auto& c) -> auto& { return c.runtime.overlap_alternate; }),
        [](const TrainConfig& c) {
            return c.parallel.dp * c.parallel.cp > 1 && c.parallel.zero == 0 && c.parallel.overlap;
        }));
    t.push_back(text("--comm-progress", "comm_progress", "How async collectives progress: thread | poll",
                     [](auto& c) -> auto& { return c.runtime.comm_progress; }, {"thread", "poll"}));
    t.push_back(only_when(toggle(
                              "--nccl-shared-gpu", "nccl_shared_gpu",
                              "Ranks that share a GPU still talk through NCCL: each takes its own NCCL_HOSTID, "
                              "so NCCL carries their collectives over its socket transport (correct; slower "
                              "than host staging)",
                              [](auto& c) -> auto& { return c.runtime.nccl_shared_gpu; }),
                          [](const TrainConfig& c) { return c.device == "cuda"; }));
    // profiler
    t.push_back(text(
        "--trace", "trace", "Write a trace file (ranks write FILE.rN parts plus the index FILE)",
        [](auto& c) -> auto& { return c.trace; }, {}, InJson::no));
    t.push_back(text(
        "--connect", "connect", "Stream the trace live to a listener at HOST:PORT",
        [](auto& c) -> auto& { return c.connect; }, {}, InJson::no));
    t.push_back(entry(
        "--slow-rank", "slow_rank",
        "Inject a straggler: this rank computes --slow-factor times as long (-1: none; docs/blame.md)", I,
        [](auto& c) -> auto& { return c.slow_rank; }));
    t.push_back(only_when(entry(
                              "--slow-factor", "slow_factor",
                              "How many times as long the --slow-rank computes (the extra is labelled as injected)", D,
                              [](auto& c) -> auto& { return c.slow_factor; }),
                          [](const TrainConfig& c) { return c.slow_rank >= 0; }));
    t.push_back(only_when(text("--slow-kind", "slow_kind",
                               "What slows the --slow-rank: work (it repeats its compute) | load (busy threads share "
                               "its CPU: a noisy neighbour)",
                               [](auto& c) -> auto& { return c.slow_kind; }, {"work", "load"}),
                          [](const TrainConfig& c) { return c.slow_rank >= 0; }));
    t.push_back(entry(
        "--fr-buffer-size", "fr_buffer_size",
        "Flight recorder: the collectives and p2p operations each rank keeps, per process (0: off; "
        "docs/engine-flight-recorder.md)",
        I, [](auto& c) -> auto& { return c.fr_buffer_size; }));
    t.push_back(text(
        "--fr-dump-dir", "fr_dump_dir",
        "Also write each rank's flight recorder dump to DIR/comm_lib_trace_rank_<rank> (PyTorch's file names)",
        [](auto& c) -> auto& { return c.fr_dump_dir; }, {}, InJson::no));
    t.push_back(entry(
        "--hang-timeout", "hang_timeout",
        "Seconds without finishing a step or a collective after which a rank writes its flight recorder dump "
        "(0: only on SIGUSR1 or death; `ultrascope run` also ends a run that makes no step for this long)",
        D, [](auto& c) -> auto& { return c.hang_timeout; }));
    t.push_back(entry(
        "--hang-rank", "hang_rank",
        "Inject a hang: this rank misbehaves at --hang-at-step as --hang-kind says (-1: none; labelled as injected)", I,
        [](auto& c) -> auto& { return c.hang_rank; }));
    t.push_back(only_when(entry(
                              "--hang-at-step", "hang_at_step", "The step at which the injected hang begins", I,
                              [](auto& c) -> auto& { return c.hang_at_step; }),
                          [](const TrainConfig& c) { return c.hang_rank >= 0; }));
    t.push_back(only_when(text("--hang-kind", "hang_kind",
                               "skip | mismatch | p2p: the rank stops calling collectives, all-reduces a gradient of "
                               "another size, or receives where it should send in the pipeline",
                               [](auto& c) -> auto& { return c.hang_kind; }, {"skip", "mismatch", "p2p"}),
                          [](const TrainConfig& c) { return c.hang_rank >= 0; }));
    t.push_back(entry(
        "--fault-kill-step", "fault_kill_step",
        "Testing: at the start of this step, --fault-kill-rank kills itself (SIGKILL)", I,
        [](auto& c) -> auto& { return c.fault_step; }, InJson::no));
    t.push_back(entry(
        "--fault-kill-rank", "fault_kill_rank", "Testing: the rank that --fault-kill-step kills", I,
        [](auto& c) -> auto& { return c.fault_rank; }, InJson::no));
    return t;
}

}  // namespace

const std::vector<Setting>& settings_schema() {
    static const std::vector<Setting> table = build_schema();
    return table;
}

const Setting* find_setting(std::string_view key) {
    for (const Setting& s : settings_schema())
        if (s.key == key) return &s;
    return nullptr;
}

const Setting& setting(std::string_view key) {
    const Setting* s = find_setting(key);
    US_ASSERT(s != nullptr, "no setting '{}' in the settings schema", key);
    return *s;
}

bool setting_applies(const Setting& s, const TrainConfig& cfg) { return !s.applies || s.applies(cfg); }

void set_setting(TrainConfig& cfg, const Setting& s, const nlohmann::json& v, const std::string& source) {
    switch (s.kind) {
        case SettingKind::integer:
        case SettingKind::unsigned_integer:
            US_CHECK_INPUT(v.is_number_integer(), "{}: '{}' must be an integer", source, s.key);
            break;
        case SettingKind::number:
            US_CHECK_INPUT(v.is_number(), "{}: '{}' must be a number", source, s.key);
            break;
        case SettingKind::boolean:
            US_CHECK_INPUT(v.is_boolean(), "{}: '{}' must be true or false", source, s.key);
            break;
        case SettingKind::text:
        case SettingKind::choice:
            US_CHECK_INPUT(v.is_string(), "{}: '{}' must be a string", source, s.key);
            break;
    }
    s.set(cfg, v);
}

TrainConfig settings_from_json(const nlohmann::json& j, const std::string& source) {
    TrainConfig cfg;
    if (j.is_null()) return cfg;
    US_CHECK_INPUT(j.is_object(), "{}: expected a JSON object of settings", source);
    for (const Setting& s : settings_schema())
        if (s.json != InJson::no)
            if (auto it = j.find(std::string(s.key)); it != j.end() && !it->is_null()) set_setting(cfg, s, *it, source);
    if (auto it = j.find("preset"); it != j.end() && it->is_string()) cfg.preset = it->get<std::string>();
    return cfg;
}

std::string flag_argument(const Setting& s, const nlohmann::json& v) {
    switch (s.kind) {
        case SettingKind::integer:
            return fmt::format("{}", v.get<int64_t>());
        case SettingKind::unsigned_integer:
            return fmt::format("{}", v.get<uint64_t>());
        case SettingKind::number:
            return fmt::format("{}", v.get<double>());  // shortest text that reads back exactly
        case SettingKind::boolean:
            return "";
        case SettingKind::text:
        case SettingKind::choice:
            return v.get<std::string>();
    }
    return "";
}

std::vector<std::string> flag_words(const Setting& s, const nlohmann::json& v) {
    if (s.kind == SettingKind::boolean) {
        if (v.get<bool>() != s.switch_value) return {};
        return {std::string(s.flag)};
    }
    return {std::string(s.flag), flag_argument(s, v)};
}

std::vector<std::string> flags_for_keys(const TrainConfig& cfg, const std::vector<std::string_view>& keys) {
    for (std::string_view k : keys) setting(k);  // each key is a setting
    std::vector<std::string> words;
    for (const Setting& s : settings_schema()) {
        if (std::find(keys.begin(), keys.end(), s.key) == keys.end()) continue;
        const auto w = flag_words(s, s.get(cfg));
        words.insert(words.end(), w.begin(), w.end());
    }
    return words;
}

}  // namespace us
