#include "common/settings/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/core/check.h"
#include "common/schedule/pipeline_schedule.h"

namespace us {

namespace fs = std::filesystem;

void TrainConfig::validate() const {
    model.validate();
    US_CHECK_INPUT(batch > 0, "--batch must be positive (got {})", batch);
    US_CHECK_INPUT(grad_accum > 0, "--grad-accum must be positive (got {})", grad_accum);
    US_CHECK_INPUT(steps >= 0, "--steps must not be negative (got {})", steps);
    US_CHECK_INPUT(save_every >= 0, "--save-every must not be negative (got {})", save_every);
    US_CHECK_INPUT(save_every == 0 || !save.empty(), "--save-every {} needs --save FILE: the checkpoint to write",
                   save_every);
    US_CHECK_INPUT(adamw.lr > 0, "--lr must be positive (got {})", adamw.lr);
    US_CHECK_INPUT(warmup >= 0, "--warmup must not be negative (got {})", warmup);
    US_CHECK_INPUT(grad_clip >= 0, "--grad-clip must not be negative (got {}); 0 disables clipping", grad_clip);
    US_CHECK_INPUT(adamw.weight_decay >= 0, "--weight-decay must not be negative (got {})", adamw.weight_decay);
    US_CHECK_INPUT(threads >= 0, "--threads must not be negative (got {})", threads);
    US_CHECK_INPUT(!fp32_grad_accum || precision == Precision::bf16,
                   "--fp32-grad-accum needs --precision bf16 (fp32 runs already accumulate in fp32)");
    const ParallelConfig& p = parallel;
    for (auto [name, v] : {std::pair{"dp", p.dp}, {"pp", p.pp}, {"tp", p.tp}, {"cp", p.cp}, {"ep", p.ep}})
        US_CHECK_INPUT(v >= 1, "--{} must be at least 1 (got {})", name, v);
    // Tensor and sequence parallelism: heads (and with them the hidden size and the MLP) split over the tp group;
    // the vocabulary is padded to a multiple of tp instead of refused.
    US_CHECK_INPUT(!p.sp || p.tp > 1, "--sp (sequence parallelism) works inside a tensor-parallel group: add --tp 2 "
                                      "or more, or drop --sp");
    US_CHECK_INPUT(model.heads % p.tp == 0,
                   "--heads {} cannot be split over --tp {}: tensor parallelism gives each rank heads/tp whole heads; "
                   "use a tp that divides {} (or more heads)",
                   model.heads, p.tp, model.heads);
    US_CHECK_INPUT(!p.sp || model.seq % p.tp == 0,
                   "--seq {} cannot be split over --tp {} for --sp: sequence parallelism gives each rank seq/tp "
                   "positions; use a sequence length that divides by {}",
                   model.seq, p.tp, p.tp);
    // Context parallelism: the sequence in 2 cp (zigzag) or cp (contiguous) equal chunks; with sequence parallelism
    // a rank's positions split further over tp.
    US_CHECK_INPUT(p.cp_balance == "zigzag" || p.cp_balance == "contiguous",
                   "unknown --cp-balance '{}': expected zigzag or contiguous", p.cp_balance);
    const int cp_chunks = p.cp_balance == "zigzag" ? 2 * p.cp : p.cp;
    US_CHECK_INPUT(p.cp == 1 || model.seq % cp_chunks == 0,
                   "--seq {} cannot be split over --cp {} ({}): it needs {} equal chunks; use a sequence length that "
                   "divides by {}",
                   model.seq, p.cp, p.cp_balance, cp_chunks, cp_chunks);
    US_CHECK_INPUT(!p.sp || p.cp == 1 || (model.seq / p.cp) % p.tp == 0,
                   "--sp with --cp {}: each rank's {} positions must split over --tp {}", p.cp, model.seq / p.cp, p.tp);
    // Mixture of experts and expert parallelism: ep shares the data-parallel ranks (as Megatron and torchtitan do).
    US_CHECK_INPUT(moe_capacity_factor >= 0, "--moe-capacity-factor must not be negative (got {}); 0 is dropless",
                   moe_capacity_factor);
    US_CHECK_INPUT(moe_aux_loss_coef >= 0, "--moe-aux-loss-coef must not be negative (got {})", moe_aux_loss_coef);
    US_CHECK_INPUT(p.ep == 1 || model.is_moe(), "--ep {} needs experts to spread: add --moe-experts E (a multiple of {})",
                   p.ep, p.ep);
    US_CHECK_INPUT(!model.is_moe() || model.moe_experts % p.ep == 0,
                   "--moe-experts {} cannot be split over --ep {}: each expert-parallel rank holds E/ep whole experts",
                   model.moe_experts, p.ep);
    US_CHECK_INPUT(p.dp % p.ep == 0,
                   "--ep {} must divide --dp {}: expert-parallel ranks are carved out of the data-parallel ones (each "
                   "group of ep dp ranks holds all the experts once); use --dp {} or a multiple",
                   p.ep, p.dp, p.ep);
    US_CHECK_INPUT(!model.is_moe() || p.pp_schedule != "zb1",
                   "--pp-schedule zb1 with mixture-of-experts blocks is not supported (their expert weight gradients are "
                   "not split into a W pass): use 1f1b, afab or interleaved");
    US_CHECK_INPUT(p.zero >= 0 && p.zero <= 3, "unknown --zero stage {}: expected 0, 1, 2 or 3", p.zero);
    US_CHECK_INPUT(p.pp_schedule == "afab" || p.pp_schedule == "1f1b" || p.pp_schedule == "interleaved" ||
                       p.pp_schedule == "zb1",
                   "unknown --pp-schedule '{}': expected afab, 1f1b, interleaved or zb1", p.pp_schedule);
    US_CHECK_INPUT(p.pp_chunks >= 1, "--pp-chunks must be at least 1 (got {})", p.pp_chunks);
    US_CHECK_INPUT(p.bucket_mb > 0, "--bucket-mb must be positive (got {})", p.bucket_mb);
    US_CHECK_INPUT(p.comm_progress == "thread" || p.comm_progress == "poll",
                   "unknown --comm-progress '{}': expected thread or poll", p.comm_progress);
    US_CHECK_INPUT(device == "cpu" || device == "cuda", "unknown --device '{}': expected cpu or cuda", device);
    // Pipelines
    validate_schedule_shape(p.pp_schedule, PipelineShape{p.pp, grad_accum, p.pp_chunks});
    const int stages = p.pp * p.pp_chunks;
    US_CHECK_INPUT(model.layers % stages == 0,
                   "--layers {} cannot be split evenly over pp {} x {} chunk(s) = {} pipeline stages: use a multiple "
                   "of {} layers (each stage takes layers/{}; the first also the embedding, the last the head)",
                   model.layers, p.pp, p.pp_chunks, stages, stages, stages);
    US_CHECK_INPUT(p.pp == 1 || p.zero <= 1,
                   "--zero {} with --pp {}: pipelines compose with ZeRO-0 and ZeRO-1 only (use --zero 1)", p.zero, p.pp);
    US_CHECK_INPUT(p.pp_schedule != "zb1" || recompute != Recompute::full,
                   "--pp-schedule zb1 keeps each block's activations until its W pass; it cannot run with --recompute "
                   "full (use none or selective)");
    US_CHECK_INPUT(p.pp_schedule != "zb1" || !fp32_grad_accum,
                   "--pp-schedule zb1 with --fp32-grad-accum is not supported: drop one of them");
}

void TrainConfig::resolve_global_batch() {
    if (global_batch == 0) return;
    const int per_step = parallel.dp * batch;
    US_CHECK_INPUT(global_batch > 0, "--global-batch must be positive (got {})", global_batch);
    US_CHECK_INPUT(per_step > 0 && global_batch % per_step == 0,
                   "--global-batch {} is not divisible by dp {} x batch {} = {}: choose a multiple of {}", global_batch,
                   parallel.dp, batch, per_step, per_step);
    grad_accum = global_batch / per_step;
}

nlohmann::json TrainConfig::to_json() const {
    return {{"preset", preset},
            {"vocab", model.vocab},
            {"hidden", model.hidden},
            {"layers", model.layers},
            {"heads", model.heads},
            {"seq", model.seq},
            {"batch", batch},
            {"grad_accum", grad_accum},
            {"steps", steps},
            {"lr", adamw.lr},
            {"min_lr_ratio", min_lr_ratio},
            {"warmup", warmup},
            {"weight_decay", adamw.weight_decay},
            {"grad_clip", grad_clip},
            {"seed", seed},
            {"precision", std::string(precision_name(precision))},
            {"fp32_grad_accum", fp32_grad_accum},
            {"recompute", std::string(recompute_name(recompute))},
            {"attention", std::string(attention_name(attention))},
            {"moe_experts", model.moe_experts},
            {"moe_topk", model.moe_topk},
            {"moe_every", model.moe_every},
            {"moe_capacity_factor", moe_capacity_factor},
            {"moe_aux_loss_coef", moe_aux_loss_coef},
            {"data", data},
            {"threads", threads},
            {"device", device},
            {"dp", parallel.dp},
            {"pp", parallel.pp},
            {"tp", parallel.tp},
            {"sp", parallel.sp},
            {"cp_balance", parallel.cp_balance},
            {"cp", parallel.cp},
            {"ep", parallel.ep},
            {"zero", parallel.zero},
            {"pp_schedule", parallel.pp_schedule},
            {"pp_chunks", parallel.pp_chunks},
            {"bucket_mb", parallel.bucket_mb},
            {"overlap", parallel.overlap},
            {"comm_progress", parallel.comm_progress}};
}

void apply_config_json(TrainConfig& cfg, const nlohmann::json& j, const std::string& source) {
    US_CHECK_INPUT(j.is_object(), "{}: expected a JSON object of settings", source);
    auto get_int = [&](const std::string& key, const nlohmann::json& v) {
        US_CHECK_INPUT(v.is_number_integer(), "{}: '{}' must be an integer", source, key);
        return v.get<int64_t>();
    };
    auto get_num = [&](const std::string& key, const nlohmann::json& v) {
        US_CHECK_INPUT(v.is_number(), "{}: '{}' must be a number", source, key);
        return v.get<double>();
    };
    auto get_str = [&](const std::string& key, const nlohmann::json& v) {
        US_CHECK_INPUT(v.is_string(), "{}: '{}' must be a string", source, key);
        return v.get<std::string>();
    };
    auto get_bool = [&](const std::string& key, const nlohmann::json& v) {
        US_CHECK_INPUT(v.is_boolean(), "{}: '{}' must be true or false", source, key);
        return v.get<bool>();
    };
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& k = it.key();
        const nlohmann::json& v = it.value();
        if (k == "description" || k == "preset") continue;  // presets describe themselves; preset handled first
        else if (k == "vocab") cfg.model.vocab = int(get_int(k, v));
        else if (k == "hidden") cfg.model.hidden = int(get_int(k, v));
        else if (k == "layers") cfg.model.layers = int(get_int(k, v));
        else if (k == "heads") cfg.model.heads = int(get_int(k, v));
        else if (k == "seq") cfg.model.seq = int(get_int(k, v));
        else if (k == "batch") cfg.batch = int(get_int(k, v));
        else if (k == "grad_accum") cfg.grad_accum = int(get_int(k, v));
        else if (k == "global_batch") cfg.global_batch = int(get_int(k, v));
        else if (k == "steps") cfg.steps = int(get_int(k, v));
        else if (k == "lr") cfg.adamw.lr = get_num(k, v);
        else if (k == "min_lr_ratio") cfg.min_lr_ratio = get_num(k, v);
        else if (k == "warmup") cfg.warmup = int(get_int(k, v));
        else if (k == "weight_decay") cfg.adamw.weight_decay = get_num(k, v);
        else if (k == "grad_clip") cfg.grad_clip = get_num(k, v);
        else if (k == "seed") cfg.seed = uint64_t(get_int(k, v));
        else if (k == "precision") cfg.precision = parse_precision(get_str(k, v));
        else if (k == "fp32_grad_accum") cfg.fp32_grad_accum = get_bool(k, v);
        else if (k == "recompute") cfg.recompute = parse_recompute(get_str(k, v));
        else if (k == "attention") cfg.attention = parse_attention(get_str(k, v));
        else if (k == "moe_experts") cfg.model.moe_experts = int(get_int(k, v));
        else if (k == "moe_topk") cfg.model.moe_topk = int(get_int(k, v));
        else if (k == "moe_every") cfg.model.moe_every = int(get_int(k, v));
        else if (k == "moe_capacity_factor") cfg.moe_capacity_factor = get_num(k, v);
        else if (k == "moe_aux_loss_coef") cfg.moe_aux_loss_coef = get_num(k, v);
        else if (k == "data") cfg.data = get_str(k, v);
        else if (k == "threads") cfg.threads = int(get_int(k, v));
        else if (k == "device") cfg.device = get_str(k, v);
        else if (k == "dp") cfg.parallel.dp = int(get_int(k, v));
        else if (k == "pp") cfg.parallel.pp = int(get_int(k, v));
        else if (k == "tp") cfg.parallel.tp = int(get_int(k, v));
        else if (k == "sp") cfg.parallel.sp = get_bool(k, v);
        else if (k == "cp_balance") cfg.parallel.cp_balance = get_str(k, v);
        else if (k == "cp") cfg.parallel.cp = int(get_int(k, v));
        else if (k == "ep") cfg.parallel.ep = int(get_int(k, v));
        else if (k == "zero") cfg.parallel.zero = int(get_int(k, v));
        else if (k == "pp_schedule") cfg.parallel.pp_schedule = get_str(k, v);
        else if (k == "pp_chunks") cfg.parallel.pp_chunks = int(get_int(k, v));
        else if (k == "bucket_mb") cfg.parallel.bucket_mb = get_num(k, v);
        else if (k == "overlap") cfg.parallel.overlap = get_bool(k, v);
        else if (k == "comm_progress") cfg.parallel.comm_progress = get_str(k, v);
        else fail_user("{}: unknown setting '{}' (settings use the flag names with '_' for '-', e.g. grad_accum)",
                       source, k);
    }
}

std::string assets_dir() {
    if (const char* env = std::getenv("ULTRASCOPE_ASSETS"); env && *env) return env;
    return std::string(US_SOURCE_DIR) + "/assets";
}

std::string default_corpus_path() { return assets_dir() + "/corpus/default.txt"; }

std::vector<std::string> list_presets() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(assets_dir() + "/presets", ec))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

void apply_preset(TrainConfig& cfg, const std::string& name) {
    const std::string path = assets_dir() + "/presets/" + name + ".json";
    std::ifstream in(path);
    if (!in.good()) {
        std::string known;
        for (const auto& n : list_presets()) known += (known.empty() ? "" : ", ") + n;
        fail_user("unknown preset '{}': known presets are {}", name, known.empty() ? "(none found)" : known);
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        fail_user("preset file '{}' is not valid JSON: {}", path, e.what());
    }
    apply_config_json(cfg, j, "preset '" + name + "'");
    cfg.preset = name;
}

void validate_layout(const ParallelConfig& p, int world_size) {
    US_CHECK_INPUT(p.world() == world_size,
                   "the layout dp {} x pp {} x tp {} x cp {} needs {} ranks but {} were started: start mpirun -n {} "
                   "(or change the degrees; --ep shares the dp ranks)",
                   p.dp, p.pp, p.tp, p.cp, p.world(), world_size, p.world());
}

}  // namespace us
