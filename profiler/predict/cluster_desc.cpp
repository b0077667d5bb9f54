#include "profiler/predict/cluster_desc.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "profiler/predict/json_fields.h"
#include "common/core/check.h"
#include "common/settings/config.h"

namespace us::predict {

namespace fs = std::filesystem;

namespace {

// A sorted (x, y) table read at x: interpolated in log x, clamped at the ends.
double log_interpolate(const std::vector<std::pair<double, double>>& table, double x) {
    if (x <= table.front().first) return table.front().second;
    if (x >= table.back().first) return table.back().second;
    for (size_t i = 1; i < table.size(); ++i) {
        const auto [x1, y1] = table[i];
        if (x > x1) continue;
        const auto [x0, y0] = table[i - 1];
        const double t = (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0));
        return y0 + t * (y1 - y0);
    }
    return table.back().second;
}

// A list of [x > 0, y in (0, 1.5]] pairs, sorted by x.
std::vector<std::pair<double, double>> read_table(const nlohmann::json& table, const std::string& where,
                                                  const char* key, const char* x_name) {
    US_CHECK_INPUT(table.is_array() && !table.empty(), "{}: '{}' must be a list of [{}, efficiency] pairs", where, key,
                   x_name);
    std::vector<std::pair<double, double>> out;
    for (const auto& row : table) {
        US_CHECK_INPUT(row.is_array() && row.size() == 2 && row[0].is_number() && row[1].is_number() &&
                           row[0].get<double>() > 0 && row[1].get<double>() > 0 && row[1].get<double>() <= 1.5,
                       "{}: '{}' row {} must be [{} > 0, efficiency in (0, 1.5]]", where, key, row.dump(), x_name);
        out.emplace_back(row[0].get<double>(), row[1].get<double>());
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

double ClusterDesc::gemm_eff(double flops) const {
    return gemm_efficiency.empty() ? 0.7 : log_interpolate(gemm_efficiency, flops);
}

double ClusterDesc::attention_length_factor(double keys) const {
    return attention_length_efficiency.empty() ? 1.0 : log_interpolate(attention_length_efficiency, keys);
}

namespace {

Link link_from_json(const nlohmann::json& j, const std::string& where) {
    const JsonFields f(j, where, {"bandwidth", "latency", "note"});
    return {f.required_number("bandwidth"), f.number("latency", 0)};
}

}  // namespace

ClusterDesc cluster_from_json(const nlohmann::json& j, const std::string& source) {
    const JsonFields f(j, source,
                       {"name", "description", "source", "gpu", "gpus_per_node", "nodes", "placement", "intra_node",
                        "inter_node", "inter_node_bucket_bandwidth", "inter_node_overlap_slowdown", "op_costs",
                        "calibrated", "default_precision", "measurements"});
    ClusterDesc c;
    c.name = f.required_text("name");
    c.description = f.text("description", "");
    c.source = f.text("source", "");
    c.calibrated = f.boolean("calibrated", false);
    c.default_precision = f.text("default_precision", "bf16");
    US_CHECK_INPUT(c.default_precision == "bf16" || c.default_precision == "fp32",
                   "{}: field 'default_precision' must be bf16 or fp32 (got '{}')", source, c.default_precision);
    {
        const JsonFields g(f.object("gpu"), source + ", field 'gpu'",
                           {"name", "peak_flops_bf16", "peak_flops_fp32", "memory_bytes", "memory_bandwidth",
                            "reserved_bytes", "note"});
        c.gpu_name = g.required_text("name");
        c.peak_flops_fp32 = g.required_number("peak_flops_fp32");
        c.peak_flops_bf16 = g.number("peak_flops_bf16", c.peak_flops_fp32);
        c.memory_bytes = g.required_integer("memory_bytes");
        c.memory_bandwidth = g.required_number("memory_bandwidth");
        c.reserved_bytes = g.integer("reserved_bytes", 0);
    }
    c.gpus_per_node = f.required_integer("gpus_per_node");
    c.nodes = f.integer("nodes", 1, 1);
    c.placement = f.text("placement", "block");
    US_CHECK_INPUT(c.placement == "block" || c.placement == "cyclic",
                   "{}: field 'placement' must be block or cyclic (got '{}')", source, c.placement);
    c.intra_node = link_from_json(f.object("intra_node"), source + ", field 'intra_node'");
    c.inter_node =
        f.has("inter_node") ? link_from_json(f.object("inter_node"), source + ", field 'inter_node'") : c.intra_node;
    c.inter_node_bucket_bandwidth = f.number("inter_node_bucket_bandwidth", 0);
    US_CHECK_INPUT(c.inter_node_bucket_bandwidth >= 0,
                   "{}: field 'inter_node_bucket_bandwidth' must not be negative (bytes/s; 0: inter_node's)", source);
    if (f.has("inter_node_overlap_slowdown")) {
        c.inter_node_overlap_slowdown = f.number("inter_node_overlap_slowdown", 0);
        US_CHECK_INPUT(c.inter_node_overlap_slowdown >= 0 && c.inter_node_overlap_slowdown < 1,
                       "{}: field 'inter_node_overlap_slowdown' must be in [0, 1) (the fraction by which compute "
                       "beside communication hidden on the inter-node link runs longer; got {})",
                       source, c.inter_node_overlap_slowdown);
    }
    // Per-op costs: datasheet clusters derive the memory-bound ops from the memory bandwidth (docs/planner.md);
    // a calibrated machine file gives them measured.
    const double bw = c.memory_bandwidth;
    c.norm_s = 16.0 / bw, c.elementwise_s = 12.0 / bw, c.embedding_s = 8.0 / bw, c.loss_s = 16.0 / bw;
    c.optimizer_s = 32.0 / bw;
    // A calibrated machine is the CPU engine, whose naive kernel skips the masked keys; GPU kernels by default not.
    c.naive_attention_skips_masked = c.calibrated;
    if (f.has("op_costs")) {
        const std::string where = source + ", field 'op_costs'";
        const JsonFields o(
            f.object("op_costs"), where,
            {"gemm_efficiency", "attention_efficiency", "attention_length_efficiency", "norm_s_per_element",
             "elementwise_s_per_element", "embedding_s_per_element", "loss_s_per_element", "optimizer_s_per_param",
             "host_overhead", "naive_attention_skips_masked", "overlap_slowdown", "note", "attention_length_note",
             "overlap_note"});
        if (o.has("gemm_efficiency"))
            c.gemm_efficiency = read_table(o.raw("gemm_efficiency"), where, "gemm_efficiency", "FLOPs");
        if (o.has("attention_length_efficiency"))
            c.attention_length_efficiency =
                read_table(o.raw("attention_length_efficiency"), where, "attention_length_efficiency", "keys");
        c.attention_efficiency = o.number("attention_efficiency", c.attention_efficiency);
        US_CHECK_INPUT(c.attention_efficiency > 0, "{}: 'attention_efficiency' must be positive", where);
        c.norm_s = o.number("norm_s_per_element", c.norm_s);
        c.elementwise_s = o.number("elementwise_s_per_element", c.elementwise_s);
        c.embedding_s = o.number("embedding_s_per_element", c.embedding_s);
        c.loss_s = o.number("loss_s_per_element", c.loss_s);
        c.optimizer_s = o.number("optimizer_s_per_param", c.optimizer_s);
        c.host_overhead = o.number("host_overhead", 0);
        c.overlap_slowdown = o.number("overlap_slowdown", 0);  // at least 0, or refused there
        US_CHECK_INPUT(c.overlap_slowdown < 1,
                       "{}: 'overlap_slowdown' must be in [0, 1): the fraction by which compute beside a hidden "
                       "transfer runs longer (got {})",
                       where, c.overlap_slowdown);
        c.naive_attention_skips_masked = o.boolean("naive_attention_skips_masked", c.naive_attention_skips_masked);
    }
    return c;
}

nlohmann::json cluster_to_json(const ClusterDesc& c) {
    nlohmann::json eff = nlohmann::json::array();
    for (const auto& [f, e] : c.gemm_efficiency) eff.push_back({f, e});
    nlohmann::json length = nlohmann::json::array();
    for (const auto& [k, e] : c.attention_length_efficiency) length.push_back({k, e});
    nlohmann::json j = {{"name", c.name},
                        {"description", c.description},
                        {"source", c.source},
                        {"calibrated", c.calibrated},
                        {"default_precision", c.default_precision},
                        {"gpu",
                         {{"name", c.gpu_name},
                          {"peak_flops_bf16", c.peak_flops_bf16},
                          {"peak_flops_fp32", c.peak_flops_fp32},
                          {"memory_bytes", c.memory_bytes},
                          {"memory_bandwidth", c.memory_bandwidth},
                          {"reserved_bytes", c.reserved_bytes}}},
                        {"gpus_per_node", c.gpus_per_node},
                        {"nodes", c.nodes},
                        {"placement", c.placement},
                        {"intra_node", {{"bandwidth", c.intra_node.bandwidth}, {"latency", c.intra_node.latency}}},
                        {"inter_node", {{"bandwidth", c.inter_node.bandwidth}, {"latency", c.inter_node.latency}}},
                        {"op_costs",
                         {{"gemm_efficiency", eff},
                          {"attention_efficiency", c.attention_efficiency},
                          {"norm_s_per_element", c.norm_s},
                          {"elementwise_s_per_element", c.elementwise_s},
                          {"embedding_s_per_element", c.embedding_s},
                          {"loss_s_per_element", c.loss_s},
                          {"optimizer_s_per_param", c.optimizer_s},
                          {"host_overhead", c.host_overhead},
                          {"overlap_slowdown", c.overlap_slowdown},
                          {"naive_attention_skips_masked", c.naive_attention_skips_masked}}}};
    if (!length.empty()) j["op_costs"]["attention_length_efficiency"] = length;  // none: 1 (a calibrated kernel)
    if (c.inter_node_bucket_bandwidth > 0) j["inter_node_bucket_bandwidth"] = c.inter_node_bucket_bandwidth;
    if (c.inter_node_overlap_slowdown >= 0) j["inter_node_overlap_slowdown"] = c.inter_node_overlap_slowdown;
    return j;
}

std::string clusters_dir() { return assets_dir() + "/clusters"; }

std::vector<std::string> known_clusters() {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(clusters_dir(), ec))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    return names;
}

ClusterDesc load_cluster(const std::string& spec) {
    US_CHECK_INPUT(!spec.empty(), "--gpu/--cluster needs a name or a file");
    if (spec.find('/') != std::string::npos || spec.ends_with(".json")) {
        US_CHECK_INPUT(fs::exists(spec),
                       "cluster file '{}': no such file (write one with `ultrascope calibrate --out "
                       "FILE`, or copy one of assets/clusters)",
                       spec);
        return cluster_from_json(read_json_file(spec), "cluster file '" + spec + "'");
    }
    const std::string path = clusters_dir() + "/" + spec + ".json";
    if (!fs::exists(path)) {
        std::string known;
        for (const std::string& n : known_clusters()) known += (known.empty() ? "" : ", ") + n;
        fail_user("unknown GPU '{}': known are {} (or --cluster FILE)", spec, known);
    }
    return cluster_from_json(read_json_file(path), "cluster file '" + path + "'");
}

}  // namespace us::predict
