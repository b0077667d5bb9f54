// Everything one run of ultrascope-train needs to know. Built in layers: defaults, then a preset
// (assets/presets/NAME.json), then a config file (--config FILE.json), then command-line flags; later layers win.
// Config files and presets use the flag names with '_' for '-' as keys (grad_accum, pp_schedule, bucket_mb); each
// setting's flag, key, help and kind are defined once in settings_schema.cpp, its cross-setting rules in
// settings_rules.cpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/settings/adamw_config.h"
#include "common/settings/gpt_config.h"
#include "common/settings/parallel_layout.h"

namespace us {

// How the engine's ranks run their communication: knobs of a run's runtime, not of its layout (the planner and the
// predictions never read them).
struct EngineRuntime {
    bool overlap_alternate = false;        // overlap in every other step only (calibration: --overlap-alternate)
    std::string comm_progress = "thread";  // thread | poll: how async collectives make progress
    bool nccl_shared_gpu = false;          // ranks that share a GPU still use NCCL (a host id each: sockets)
};

struct TrainConfig {
    std::string preset;
    GPTConfig model;
    int batch = 8;         // micro-batch size, sequences (B)
    int grad_accum = 1;    // micro-batches per step (M)
    int global_batch = 0;  // sequences per optimizer step; when set, grad_accum = global_batch / (dp * batch)
    int steps = 50;
    AdamWConfig adamw;
    double min_lr_ratio = 0.1;  // cosine decay ends at lr * min_lr_ratio
    int warmup = 10;
    double grad_clip = 1.0;
    uint64_t seed = 1337;
    Precision precision = Precision::fp32;
    bool fp32_grad_accum = false;
    Recompute recompute = Recompute::none;
    Attention attention = Attention::naive;
    // Mixture of experts (the model's shape is in `model`: moe_experts, moe_topk, moe_every)
    double moe_capacity_factor = 0.0;  // 0: dropless; F > 0: an expert takes at most ceil(tokens K / E * F) tokens
    double moe_aux_loss_coef = 0.01;   // A: weight of the load-balancing loss E * sum_i f_i P_i
    std::string data;                  // empty: the default corpus
    std::string save, load, metrics_out;
    int save_every = 0;  // > 0: also write --save every this many steps (atomically), not only at the end
    int threads = 0;     // per rank; 0: cores / ranks on this host
    std::string device = "cpu";
    ParallelLayout parallel;
    EngineRuntime runtime;
    // profiler
    std::string trace;    // --trace FILE
    std::string connect;  // --connect HOST:PORT
    bool quiet = false;
    // Fault injection for the failure tests: rank `fault_rank` kills itself (SIGKILL) at the start of `fault_step`.
    int fault_step = 0;
    int fault_rank = -1;
    // An injected straggler (docs/blame.md): rank `slow_rank` runs each forward and backward slow_factor times as
    // long. slow_kind "work": it repeats its compute (real GEMM work, in spans named as injected); "load": busy
    // threads share its CPU with its trainer thread (a noisy neighbour: the time is the machine's, not its work's).
    int slow_rank = -1;
    double slow_factor = 1.0;
    std::string slow_kind = "work";
    // The flight recorder (docs/engine-flight-recorder.md): each rank keeps its last fr_buffer_size collectives and
    // point-to-point operations per process group (0: off) and writes them, in PyTorch's Flight Recorder format, on
    // a watchdog's timeout (hang_timeout seconds without finishing a step or an operation; 0: no watchdog), on
    // SIGUSR1 and when it dies, to the live stream or the trace and, with fr_dump_dir, to files.
    int fr_buffer_size = 2000;
    std::string fr_dump_dir;
    double hang_timeout = 0;
    // An injected hang for teaching and tests (labelled as injected wherever it shows): rank hang_rank, at step
    // hang_at_step, stops calling collectives (skip), records a differently sized gradient all-reduce and waits
    // (mismatch), or receives where it should send in the pipeline (p2p).
    int hang_rank = -1;
    int hang_at_step = 1;
    std::string hang_kind = "skip";

    int64_t tokens_per_step() const { return int64_t(batch) * grad_accum * model.seq * parallel.dp; }
    static constexpr int kMaxThreads = 1024;  // a rank's compute threads: more than any machine's cores
    // Throws UserError naming the first invalid value.
    void validate() const;
    // The injected hang's flags (part of validate()).
    void check_injected_hang() const;
    // Derives grad_accum from global_batch (when set); UserError when it does not divide.
    void resolve_global_batch();
    nlohmann::json to_json() const;
};

// Applies the keys of a JSON object (a preset or a config file) onto cfg. UserError on unknown keys or wrong
// types, naming `source`.
void apply_config_json(TrainConfig& cfg, const nlohmann::json& j, const std::string& source);

// Where presets, the default corpus and fonts live: $ULTRASCOPE_ASSETS, else the source tree's assets/.
std::string assets_dir();
std::string default_corpus_path();
std::vector<std::string> list_presets();
// Loads assets/presets/NAME.json onto cfg. UserError naming the known presets when NAME is unknown.
void apply_preset(TrainConfig& cfg, const std::string& name);

}  // namespace us
