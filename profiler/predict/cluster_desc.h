// What the planner knows about a cluster: the accelerator (peak FLOP/s per precision, memory and its bandwidth), how
// many sit in a node, the links inside and between nodes (bandwidth and latency: the alpha-beta model of
// docs/planner.md), and the per-op costs the step-time model uses. Descriptions are data: assets/clusters/*.json
// (datasheet figures, with their sources) or a machine file that `ultrascope calibrate` measured.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace us::predict {

struct Link {
    double bandwidth = 1e9;  // bytes per second one GPU can send on this link level
    double latency = 1e-5;   // seconds per hop (a collective over n ranks pays 2 log2(n) hops)
};

struct ClusterDesc {
    std::string name, description, source;
    // the accelerator
    std::string gpu_name;
    double peak_flops_bf16 = 0, peak_flops_fp32 = 0;  // dense, per GPU
    int64_t memory_bytes = 0;                         // HBM (or the host memory a CPU rank may use)
    double memory_bandwidth = 0;                      // bytes/s
    int64_t reserved_bytes = 0;  // what the runtime holds beyond the modelled categories (context, libraries, buffers)
    // the cluster
    int64_t gpus_per_node = 8, nodes = 1;
    Link intra_node, inter_node;
    // The bandwidth data parallelism's gradient buckets see across nodes, several in flight behind the backward,
    // where it was measured apart from inter_node's one collective at a time (`calibrate --nodes`: over TCP they
    // see less; docs/nodes.md). 0: inter_node's.
    double inter_node_bucket_bandwidth = 0;
    // overlap_slowdown (below) for communication hidden on the inter-node link, where it was measured apart
    // (`calibrate --nodes`: over TCP the kernel's network work and the transport's copies take CPU from the compute
    // beside them; docs/nodes.md). Negative: overlap_slowdown's.
    double inter_node_overlap_slowdown = -1;
    // How ranks are laid on the nodes: "block" (consecutive ranks a node: tp, innermost in the grid, stays in one)
    // or "cyclic" (rank r on node r mod nodes), as `ultrascope run --node-placement` places them.
    std::string placement = "block";
    // Per-op costs (seconds), the step-time model's inputs. GEMMs: achieved / peak as a function of a GEMM's FLOPs
    // (sorted by FLOPs; interpolated in log FLOPs). Others: seconds per element of the op's natural size
    // (docs/planner.md lists each).
    std::vector<std::pair<double, double>> gemm_efficiency;
    // Achieved / peak on the attention core's executed FLOPs (executed_attention_flops, docs/planner.md): the
    // visible half of the causal square for kernels that skip the masked keys, the whole square for those that don't.
    double attention_efficiency = 0.5;
    // Blockwise kernels (flash, context parallelism's per-block calls) on short blocks: a factor on
    // attention_efficiency as a function of the keys a kernel call runs against (the sequence, or its s/cp under
    // context parallelism), sorted by keys, interpolated in log keys, clamped at the ends. Empty: 1 (a calibrated
    // machine measured its own kernel).
    std::vector<std::pair<double, double>> attention_length_efficiency;
    bool naive_attention_skips_masked = false;  // the naive kernel skips the masked keys (the CPU engine's does)
    double norm_s = 0, elementwise_s = 0, embedding_s = 0, loss_s = 0, optimizer_s = 0;
    double host_overhead = 0;  // fraction of compute lost between ops (launches, framework): measured on a CPU
    // Compute running beside a hidden transfer takes this fraction longer (the transfer's kernels hold SMs and memory
    // bandwidth): the step-time model charges overlap_slowdown x the hidden time. 0: none (a calibrated machine's
    // measured op times carry its own).
    double overlap_slowdown = 0;
    bool calibrated = false;  // true: a machine file `ultrascope calibrate` measured
    std::string default_precision = "bf16";

    double attention_length_factor(double keys) const;
    int64_t total_gpus() const { return gpus_per_node * nodes; }
    double peak_flops(bool bf16) const { return bf16 ? peak_flops_bf16 : peak_flops_fp32; }
    // The slowdown of compute beside communication hidden on `link` (intra_node or inter_node).
    double overlap_slowdown_on(const Link& link) const {
        return &link == &inter_node && inter_node_overlap_slowdown >= 0 ? inter_node_overlap_slowdown
                                                                        : overlap_slowdown;
    }
    double gemm_eff(double flops) const;  // interpolated, clamped to the table's ends
};

ClusterDesc cluster_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json cluster_to_json(const ClusterDesc& c);
// A file path, or assets/clusters/NAME.json; UserError listing the known names otherwise.
ClusterDesc load_cluster(const std::string& spec);
std::vector<std::string> known_clusters();
std::string clusters_dir();

}  // namespace us::predict
