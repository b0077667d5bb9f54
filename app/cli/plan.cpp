// `ultrascope plan`: for a model on a cluster, which layout fits and how fast it runs (docs/planner.md). With layout
// flags (ultrascope-train's: --dp --tp --sp --pp ...) it evaluates that layout; without them it searches every valid
// layout of --gpus GPUs for a global batch and ranks them, saying why the others lose. Nothing runs.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "app/plan/planner.h"
#include "app/plan/predicted_trace.h"
#include "common/core/check.h"
#include "common/core/format.h"
#include "common/settings/cli.h"

namespace us::app {

namespace {

using predict::ClusterDesc;
using predict::ModelDesc;
using predict::PlanResult;

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(int64_t(1) << 30)); }

std::string model_line(const ModelDesc& m) {
    std::string s = fmt::format("Model {} ({}): L {} h {} heads {}", m.name, predict::family_name(m.family), m.layers,
                                m.hidden, m.heads);
    if (m.kv() != m.heads) s += fmt::format(" (kv {})", m.kv());
    s += fmt::format(" ffn {} v {} seq {}", m.ffn(), m.vocab, m.seq);
    if (m.is_moe()) s += fmt::format(", {} experts, top-{}", m.moe_experts, m.moe_topk);
    s += fmt::format(": {:.3f}B parameters (formula)", double(m.num_params()) / 1e9);
    if (m.published_params > 0) s += fmt::format(", {:.3g}B published", m.published_params / 1e9);
    if (m.is_moe()) s += fmt::format(", {:.3f}B active", double(m.active_params()) / 1e9);
    return s + "\n";
}

std::string cluster_line(const ClusterDesc& c) {
    // 3 significant figures: a datasheet's 450 GB/s and a calibrated CPU machine's 0.087 alike
    const std::string buckets =
        c.inter_node_bucket_bandwidth > 0
            ? fmt::format(" ({:.3g} GB/s for data parallelism's gradient buckets)", c.inter_node_bucket_bandwidth / 1e9)
            : "";
    return fmt::format(
        "Cluster {}: {} x {} GPUs of {} ({:.0f} TFLOP/s bf16, {:.1f} TFLOP/s fp32, {}), intra-node "
        "{:.3g} GB/s, inter-node {:.3g} GB/s per GPU{}{}\n",
        c.name, c.nodes, c.gpus_per_node, c.gpu_name, c.peak_flops_bf16 / 1e12, c.peak_flops_fp32 / 1e12,
        gib(double(c.memory_bytes)), c.intra_node.bandwidth / 1e9, c.inter_node.bandwidth / 1e9, buckets,
        c.calibrated ? " (calibrated on this machine)" : "");
}

std::string format_one(const ModelDesc& m, const ClusterDesc& c, const PlanResult& r) {
    std::string s =
        fmt::format("Layout: {} on {} GPUs ({})\n", r.layout.describe(), r.layout.world(), r.layout.flags());
    s +=
        fmt::format("\nMemory per GPU, busiest rank (pipeline stage {}, {} micro-batch(es) in flight), {}:\n",
                    r.memory.stage, r.memory.micro_batches_in_flight,
                    r.memory.kind == "predicted" ? "predicted (the engine's exact walk)" : "formula (docs/planner.md)");
    for (int i = 0; i < kMemCategoryCount; ++i)
        s += fmt::format("  {:<16} {:>12}\n", kMemCategoryNames[size_t(i)],
                         r.memory.modelled[size_t(i)] ? format_bytes(r.memory.bytes[size_t(i)]) : "not modelled");
    s += fmt::format("  {:<16} {:>12}   (the cluster file's runtime reserve)\n", "reserved",
                     format_bytes(r.memory.reserved_bytes));
    s += fmt::format("  {:<16} {:>12}   of {}: {}\n", "total", format_bytes(r.memory.total()),
                     format_bytes(c.memory_bytes), r.fits ? "fits" : "does NOT fit");
    const predict::StepPieces& t = r.time;
    s += fmt::format("\nStep time ({}), seconds per step:\n",
                     c.calibrated ? "model with this machine's measured costs"
                                  : "model with datasheet figures and assumed efficiencies");
    auto row = [&](const char* what, double v, const char* note = "") {
        if (v > 0) s += fmt::format("  {:<34} {:>10.4g}  {}\n", what, v, note);
    };
    row("GEMMs (forward + backward)", t.gemm_s);
    row("attention core", t.attention_s);
    row("other ops (norms, element-wise, loss)", t.other_ops_s);
    row("recomputation", t.recompute_s);
    row("tensor-parallel collectives", t.tp_comm_s, "(critical path)");
    row(r.layout.parallel.cp_comm == CpComm::allgather ? "context-parallel all-gathers, exposed"
                                                       : "context-parallel ring, exposed",
        t.cp_comm_exposed_s);
    row("context-parallel ring, hidden", t.cp_comm_hidden_s, "(behind attention, not added)");
    row("expert-parallel all-to-alls", t.ep_comm_s);
    row("pipeline transfers", t.pp_comm_s);
    row("pipeline bubble", t.bubble_s, "(simulated schedule)");
    row("data-parallel / ZeRO, exposed", t.dp_comm_exposed_s);
    row("data-parallel / ZeRO, hidden", t.dp_comm_hidden_s, "(behind compute, not added)");
    row("optimizer", t.optimizer_s);
    row("compute slowed by hidden transfers", t.overlap_slowdown_s, "(the cluster's overlap_slowdown)");
    s += fmt::format("  {:<34} {:>10.4g}\n", "step", t.step_s);
    s += fmt::format(
        "  busy over the step: compute {:.4g} s, intra-node link {:.4g} s, inter-node link {:.4g} s "
        "(the step is at least each)\n",
        t.compute_busy_s, t.link_busy_s[predict::kLinkIntra], t.link_busy_s[predict::kLinkInter]);
    if (m.is_moe() && r.layout.parallel.ep > 1)
        s += fmt::format("  MoE router load on the busiest ep rank: {:.3g} ({})\n", r.layout.moe_load_or_uniform(),
                         r.layout.moe_load > 0 ? "given" : "assumed uniform; --moe-load F to give one");
    s += fmt::format(
        "\nThroughput (derived): {:.4g} tokens/s ({:.0f} tokens per step); MFU {:.1f}% "
        "({:.3g} GFLOP per token by 6N + 12 L (a d) s, over {} GPUs x {:.4g} TFLOP/s {})\n",
        r.tokens_per_s, r.tokens_per_step, 100 * r.mfu, r.model_flops_per_token / 1e9, r.layout.world(),
        c.peak_flops(r.layout.bf16) / 1e12, r.layout.bf16 ? "bf16" : "fp32");
    return s;
}

// The command's own flags (beside the trainer's, which give the engine's model and a layout).
struct PlanFlags {
    std::string model_spec, gpu, cluster_file, placement, trace_out;
    int64_t gpus = 0, nodes = 0, gpus_per_node = 0, global_tokens = 0;
    int top = 10;
    bool json = false, list = false;
    int search_threads = 0;          // SearchOptions::threads (hidden: for the bench)
    bool search_no_sharing = false;  // SearchOptions::share_work off (hidden: for the bench)
    double moe_load = 0;
};

void declare_plan_flags(CLI::App& cli, PlanFlags& f) {
    cli.add_option("--model", f.model_spec,
                   "Model: a name (llama3-8b, gpt3-175b, mixtral-8x7b, an engine preset) or a "
                   "description file; without it, the engine's GPT from --preset and the shape flags");
    cli.add_option("--gpu", f.gpu, "Cluster by GPU: a100-80gb | h100-sxm | h200 (assets/clusters)");
    cli.add_option("--cluster", f.cluster_file, "Cluster description file (e.g. from `ultrascope calibrate`)");
    cli.add_option("--gpus", f.gpus, "GPUs to use (default: the layout's dp x tp x pp x cp)");
    cli.add_option("--nodes", f.nodes, "Override the cluster's node count");
    cli.add_option("--gpus-per-node", f.gpus_per_node, "Override the cluster's GPUs per node");
    cli.add_option("--node-placement", f.placement,
                   "How ranks are laid on the nodes: block (consecutive ranks a node, the default) or cyclic (rank r "
                   "on node r mod nodes), as `ultrascope run --node-placement`")
        ->check(CLI::IsMember({"block", "cyclic"}));
    cli.add_option("--global-batch-tokens", f.global_tokens, "Search: tokens per step (or --global-batch SEQUENCES)");
    cli.add_option("--top", f.top, "Search: layouts to show (0: all)");
    cli.add_flag("--json", f.json, "Print JSON: an object per layout (docs/planner.md)");
    cli.add_flag("--list", f.list, "List the known models and clusters");
    cli.add_option("--moe-load", f.moe_load,
                   "MoE with --ep: the busiest ep rank's expert rows over the uniform share (e.g. measured by a run's "
                   "router: its experts' share of the choices x ep); default uniform (1), said as assumed");
    cli.add_option(
        "--trace-out", f.trace_out,
        "Write the layout's predicted step (a search: the best fitting layout's) as a trace file: one rank per "
        "pipeline stage, open it in the GUI or `ultrascope report` like a run (marked predicted)");
    // How the search runs, not what it finds (the same figures): tests/bench/bench_planner.py --search times both.
    cli.add_option("--search-threads", f.search_threads, "Search: threads (0: one per core)")->group("");
    cli.add_flag("--search-no-sharing", f.search_no_sharing, "Search: evaluate every layout from scratch")->group("");
}

void print_known() {
    std::printf("models:");
    for (const auto& n : predict::known_models()) std::printf(" %s", n.c_str());
    std::printf("\nclusters:");
    for (const auto& n : predict::known_clusters()) std::printf(" %s", n.c_str());
    std::printf("\n");
}

// The cluster: a GPU's or a file's, with the node count, GPUs per node and placement given overriding its own.
ClusterDesc cluster_of(const PlanFlags& f) {
    US_CHECK_INPUT(f.gpu.empty() || f.cluster_file.empty(), "give --gpu NAME or --cluster FILE, not both");
    ClusterDesc cluster = predict::load_cluster(!f.cluster_file.empty() ? f.cluster_file
                                                : !f.gpu.empty()        ? f.gpu
                                                                        : "h100-sxm");
    US_CHECK_INPUT(f.nodes >= 0 && f.gpus_per_node >= 0 && f.gpus >= 0 && f.global_tokens >= 0 && f.top >= 0,
                   "--nodes, --gpus-per-node, --gpus, --global-batch-tokens and --top must not be negative");
    if (f.nodes > 0) cluster.nodes = f.nodes;
    if (f.gpus_per_node > 0) cluster.gpus_per_node = f.gpus_per_node;
    if (!f.placement.empty()) cluster.placement = f.placement;
    return cluster;
}

// The model: a description, or this engine's GPT from the preset and shape flags. Shape flags given with --model
// override its fields (e.g. --seq for a longer context).
ModelDesc model_of(const CLI::App& cli, const std::string& spec, const TrainConfig& cfg) {
    ModelDesc model;
    const GPTConfig& g = cfg.model;
    if (!spec.empty()) {
        model = predict::load_model(spec);
        if (cli.count("--seq")) model.seq = g.seq;
        if (cli.count("--layers")) model.layers = g.layers;
        if (cli.count("--hidden")) model.hidden = g.hidden;
        if (cli.count("--heads")) model.heads = g.heads;
        if (cli.count("--vocab")) model.vocab = g.vocab;
        if (cli.count("--moe-experts")) model.moe_experts = g.moe_experts;
        if (cli.count("--moe-topk")) model.moe_topk = g.moe_topk;
        if (cli.count("--moe-every")) model.moe_every = g.moe_every;
    } else {
        g.validate();
        model = predict::engine_model(cfg.preset.empty() ? "engine-gpt" : cfg.preset, g.vocab, g.hidden, g.layers,
                                      g.heads, g.seq, g.moe_experts, g.moe_topk, g.moe_every, cfg.moe_capacity_factor);
    }
    if (!spec.empty()) predict::check_model(model, fmt::format("--model {} with the shape flags given", spec));
    return model;
}

// What the planner is asked: the model on the cluster, in bf16 or not, with flash attention or not.
struct PlanQuestion {
    ModelDesc model;
    ClusterDesc cluster;
    bool bf16 = false, flash = false;
};

bool layout_given(const CLI::App& cli) {
    for (const char* f :
         {"--dp", "--tp", "--pp", "--cp", "--ep", "--zero", "--sp", "--pp-schedule", "--pp-chunks", "--grad-accum"})
        if (cli.count(f) > 0) return true;
    return false;
}

// One layout, the flags': evaluated and printed (or written as a predicted trace).
int evaluate_given_layout(const PlanQuestion& q, const PlanFlags& f, const TrainConfig& cfg) {
    predict::Layout l = predict::layout_from_config(cfg);
    US_CHECK_INPUT(f.moe_load == 0 || f.moe_load >= 1,
                   "--moe-load {} must be 1 or more (the busiest rank over the "
                   "uniform share)",
                   f.moe_load);
    l.moe_load = f.moe_load;
    l.bf16 = q.bf16;
    l.flash = q.flash;
    const int64_t n = f.gpus > 0 ? f.gpus : l.world();
    predict::check_layout(q.model, q.cluster, l, n);
    const PlanResult r = predict::evaluate(q.model, q.cluster, l);
    if (!f.trace_out.empty()) plan::write_predicted_trace(f.trace_out, q.model, q.cluster, r, n);
    if (f.json) {
        nlohmann::json out = predict::plan_json(q.model, q.cluster, r);
        out["model"] = predict::model_to_json(q.model);
        out["cluster"] = q.cluster.name;
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("%s%s\n%s", model_line(q.model).c_str(), cluster_line(q.cluster).c_str(),
                    format_one(q.model, q.cluster, r).c_str());
    }
    return 0;
}

plan::SearchOptions search_options(const PlanQuestion& q, const PlanFlags& f, const CLI::App& cli,
                                   const TrainConfig& cfg) {
    plan::SearchOptions o;
    o.gpus = f.gpus;
    US_CHECK_INPUT(o.gpus > 0, "a search needs --gpus N (or give layout flags such as --dp --tp --pp to evaluate one)");
    US_CHECK_INPUT(o.gpus <= q.cluster.total_gpus(),
                   "--gpus {} is more than cluster '{}' holds ({} nodes x {} GPUs = {}): use --nodes or fewer GPUs",
                   o.gpus, q.cluster.name, q.cluster.nodes, q.cluster.gpus_per_node, q.cluster.total_gpus());
    US_CHECK_INPUT(f.global_tokens == 0 || f.global_tokens % q.model.seq == 0,
                   "--global-batch-tokens {} is not a whole number of sequences of {} tokens", f.global_tokens,
                   q.model.seq);
    o.global_batch_sequences = f.global_tokens > 0 ? f.global_tokens / q.model.seq : cfg.global_batch;
    US_CHECK_INPUT(o.global_batch_sequences > 0,
                   "a search needs the global batch: --global-batch SEQUENCES or --global-batch-tokens TOKENS");
    o.bf16 = q.bf16;
    o.flash = q.flash;
    if (cli.count("--batch")) o.micro_batches = {cfg.batch};
    if (cli.count("--recompute")) o.recompute = {cfg.recompute};
    US_CHECK_INPUT(f.search_threads >= 0, "--search-threads must not be negative (0: one per core)");
    o.threads = f.search_threads;
    o.share_work = !f.search_no_sharing;
    return o;
}

void print_search_json(const PlanQuestion& q, const plan::SearchOptions& o, const plan::SearchResult& found,
                       size_t shown, int64_t fitting) {
    nlohmann::json layouts = nlohmann::json::array();
    for (size_t i = 0; i < shown; ++i) layouts.push_back(predict::plan_json(q.model, q.cluster, found.ranked[i]));
    nlohmann::json out = {{"model", predict::model_to_json(q.model)},
                          {"cluster", q.cluster.name},
                          {"gpus", o.gpus},
                          {"global_batch_sequences", o.global_batch_sequences},
                          {"considered", found.considered},
                          {"fitting", fitting},
                          {"pruned", found.pruned},
                          {"layouts", layouts}};
    std::printf("%s\n", out.dump(2).c_str());
}

void print_search_table(const PlanQuestion& q, const plan::SearchOptions& o, const plan::SearchResult& found,
                        size_t shown, int64_t fitting) {
    const ModelDesc& model = q.model;
    std::printf("%s%s", model_line(model).c_str(), cluster_line(q.cluster).c_str());
    std::printf("Search: %lld GPUs, %lld sequences (%lld tokens) per step, %s: %lld layouts evaluated, %lld fit\n\n",
                (long long)o.gpus, (long long)o.global_batch_sequences,
                (long long)(o.global_batch_sequences * model.seq), q.bf16 ? "bf16" : "fp32",
                (long long)found.considered, (long long)fitting);
    std::printf("%4s  %-62s %10s %9s %11s %6s  %s\n", "#", "layout", "memory", "step s", "tokens/s", "MFU", "why");
    for (size_t i = 0; i < shown; ++i) {
        const PlanResult& r = found.ranked[i];
        std::printf("%4zu  %-62s %10s %9.4g %11.4g %5.1f%%  %s\n", i + 1, r.layout.describe().c_str(),
                    gib(double(r.memory.total())).c_str(), r.time.step_s, r.tokens_per_s, 100 * r.mfu,
                    r.verdict.c_str());
    }
    // The fastest layouts that do not fit: what memory would have bought.
    int oom_shown = 0;
    for (const auto& r : found.ranked)
        if (!r.fits && oom_shown < 3 && r.time.step_s < found.ranked.front().time.step_s) {
            if (oom_shown++ == 0) std::printf("\nFaster, but out of memory:\n");
            std::printf("      %-62s %9.4g s  %s\n", r.layout.describe().c_str(), r.time.step_s, r.verdict.c_str());
        }
    std::printf("\nNot evaluated: %s\n", found.pruned.empty() ? "nothing" : "");
    for (const auto& p : found.pruned) std::printf("  %s\n", p.c_str());
    std::printf(
        "Memory: %s, plus the cluster file's runtime reserve (%s a GPU: CUDA context, libraries; an assumption, not "
        "a prediction); time: the step-time model (docs/planner.md); tokens/s and MFU derived.\n",
        model.family == predict::ModelFamily::engine_gpt ? "predicted (the engine's exact walk)" : "formula",
        format_bytes(found.ranked.empty() ? 0 : found.ranked.front().memory.reserved_bytes).c_str());
}

// Every valid layout of --gpus GPUs for the global batch, ranked; printed (or the best written as a trace).
int search_layouts(const PlanQuestion& q, const PlanFlags& f, const plan::SearchOptions& o) {
    const plan::SearchResult found = plan::search(q.model, q.cluster, o);
    US_CHECK_INPUT(!found.ranked.empty(),
                   "no layout of {} GPUs divides this model and a global batch of {} sequences: try another --gpus or "
                   "--global-batch",
                   o.gpus, o.global_batch_sequences);
    const size_t shown = f.top == 0 ? found.ranked.size() : std::min(found.ranked.size(), size_t(f.top));
    int64_t fitting = 0;
    for (const auto& r : found.ranked) fitting += r.fits;
    if (!f.trace_out.empty()) {
        US_CHECK_INPUT(found.ranked.front().fits, "--trace-out: no layout of {} GPUs fits this model: nothing to draw",
                       o.gpus);
        plan::write_predicted_trace(f.trace_out, q.model, q.cluster, found.ranked.front(), o.gpus);
    }
    if (f.json)
        print_search_json(q, o, found, shown, fitting);
    else
        print_search_table(q, o, found, shown, fitting);
    return 0;
}

}  // namespace

int plan_command(int argc, char** argv) {
    CLI::App cli{"ultrascope plan: which layout fits a model on a cluster, and how fast it runs (nothing is run)"};
    auto build = add_train_flags(cli);
    PlanFlags f;
    declare_plan_flags(cli, f);
    US_PARSE_FLAGS(cli, argc, argv, "plan");
    if (f.list) return print_known(), 0;
    const TrainConfig cfg = build().config;
    PlanQuestion q;
    q.cluster = cluster_of(f);
    q.model = model_of(cli, f.model_spec, cfg);
    // Precision and attention as given, else the cluster's defaults (plan::default_search_options, as the GUI asks).
    const plan::SearchOptions defaults = plan::default_search_options(q.cluster);
    q.bf16 = cli.count("--precision") ? cfg.precision == Precision::bf16 : defaults.bf16;
    q.flash = cli.count("--attention") ? attention_blockwise(cfg.attention) : defaults.flash;
    if (layout_given(cli)) return evaluate_given_layout(q, f, cfg);
    return search_layouts(q, f, search_options(q, f, cli, cfg));
}

}  // namespace us::app
