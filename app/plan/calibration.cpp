#include "app/plan/calibration.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "profiler/predict/model_shapes.h"
#include "common/core/check.h"
#include "profiler/analysis/report.h"
#include "profiler/trace/trace_store.h"

namespace us::plan {

std::vector<CollectiveSample> parse_collective_samples(const std::string& text) {
    std::vector<CollectiveSample> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line.front() != '{') continue;  // mpirun's own messages
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception&) {
            continue;
        }
        if (!j.contains("op") || !j.contains("bytes") || !j.contains("median_s")) continue;
        out.push_back(
            {j["op"].get<std::string>(), j.value("ranks", 2), j["bytes"].get<double>(), j["median_s"].get<double>()});
    }
    return out;
}

std::vector<CollectiveSample> fastest_samples(const std::vector<CollectiveSample>& samples) {
    std::map<std::tuple<std::string, int, double>, CollectiveSample> best;
    for (const CollectiveSample& s : samples) {
        const auto key = std::make_tuple(s.op, s.ranks, s.bytes);
        const auto it = best.find(key);
        if (it == best.end() || s.seconds < it->second.seconds) best[key] = s;
    }
    std::vector<CollectiveSample> out;
    for (const auto& [key, s] : best) out.push_back(s);
    return out;
}

predict::Link fit_link(const std::vector<CollectiveSample>& samples, FitErrors errors) {
    // seconds = latency * hops + sent * (1 / bandwidth): two regressors, no intercept.
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
    std::set<double> sizes;
    for (const CollectiveSample& s : samples) {
        const int n = std::max(2, s.ranks);
        const double steps = std::ceil(std::log2(double(n)));
        const bool reduce = s.op == "all_reduce";
        const double hops = reduce ? 2 * steps : steps;
        const double sent = (reduce ? 2.0 : 1.0) * double(n - 1) / n * s.bytes;
        // Weight by 1/t^2 for relative errors (small messages count as much as large ones), 1 for absolute.
        const double w = errors == FitErrors::absolute ? 1.0 : 1.0 / std::max(1e-9, s.seconds * s.seconds);
        a11 += w * hops * hops, a12 += w * hops * sent, a22 += w * sent * sent;
        b1 += w * hops * s.seconds, b2 += w * sent * s.seconds;
        sizes.insert(s.bytes);
    }
    US_CHECK_INPUT(sizes.size() >= 2, "calibration: the collective benchmark gave {} message size(s); need at least 2",
                   sizes.size());
    const double det = a11 * a22 - a12 * a12;
    double latency = (b1 * a22 - b2 * a12) / det, inv_bw = (a11 * b2 - a12 * b1) / det;
    if (latency < 0) {  // no measurable latency: fit the bandwidth alone
        latency = 0;
        inv_bw = b2 / a22;
    }
    US_CHECK_INPUT(inv_bw > 0, "calibration: the collective timings do not grow with the message size");
    return {1.0 / inv_bw, latency};
}

double dp_all_reduce_bandwidth(const prof::TraceStore& store) {
    struct Window {
        int64_t first_begin = INT64_MAX, last_end = INT64_MIN;
        uint64_t bytes = 0;
    };
    struct Across {  // the window opens when the last rank starts, closes when all are done
        int64_t last_begin = INT64_MIN, last_end = INT64_MIN;
        uint64_t bytes = 0;
        int ranks = 0;
    };
    std::map<int32_t, Across> steps;
    for (int r : store.ranks()) {
        const prof::RankTrace* rt = store.rank(r);
        if (!rt) continue;
        std::map<int32_t, Window> mine;
        for (const prof::Span& s : rt->lanes[size_t(prof::Lane::comm)].spans()) {
            if (s.kind != prof::SpanKind::comm || s.op != prof::OpClass::all_reduce ||
                s.group != uint8_t(prof::GroupKind::dp) || s.bytes < 4096 || s.step < 2)
                continue;
            Window& w = mine[s.step];
            w.first_begin = std::min(w.first_begin, s.begin);
            w.last_end = std::max(w.last_end, s.end);
            w.bytes += s.bytes;
        }
        for (const auto& [step, w] : mine) {
            Across& all = steps[step];
            all.last_begin = std::max(all.last_begin, w.first_begin);
            all.last_end = std::max(all.last_end, w.last_end);
            all.bytes = std::max(all.bytes, w.bytes);
            ++all.ranks;
        }
    }
    double best = 0;
    for (const auto& [step, w] : steps) {
        if (w.ranks < 2 || w.last_end <= w.last_begin) continue;
        const double sent = 2.0 * double(w.ranks - 1) / w.ranks * double(w.bytes);
        best = std::max(best, sent / (double(w.last_end - w.last_begin) * 1e-9));
    }
    return best;
}

double tp_all_reduce_bandwidth(const prof::TraceStore& store) {
    struct Call {
        double seconds, bytes;
    };
    std::vector<std::vector<Call>> calls;  // per rank, its tp all-reduces in order
    for (int r : store.ranks()) {
        const prof::RankTrace* rt = store.rank(r);
        if (!rt) continue;
        std::vector<Call>& mine = calls.emplace_back();
        for (const prof::Span& s : rt->lanes[size_t(prof::Lane::comm)].spans())
            if (s.kind == prof::SpanKind::comm && s.op == prof::OpClass::all_reduce &&
                s.group == uint8_t(prof::GroupKind::tp) && s.bytes >= 65536 && s.step >= 2 && s.end > s.begin)
                mine.push_back({double(s.duration()) * 1e-9, double(s.bytes)});
    }
    const int ranks = int(calls.size());
    if (ranks < 2) return 0;
    size_t common = SIZE_MAX;
    for (const auto& mine : calls) common = std::min(common, mine.size());
    std::vector<double> bandwidths;
    for (size_t k = 0; k < common; ++k) {
        double shortest = 1e300;
        for (const auto& mine : calls) shortest = std::min(shortest, mine[k].seconds);
        bandwidths.push_back(2.0 * double(ranks - 1) / ranks * calls.front()[k].bytes / shortest);
    }
    if (bandwidths.empty()) return 0;
    std::nth_element(bandwidths.begin(), bandwidths.begin() + long(bandwidths.size() / 2), bandwidths.end());
    return bandwidths[bandwidths.size() / 2];
}

namespace {

// An op with FLOPs in a steady step: its name, FLOPs, time, how much of that time a dp collective was outstanding
// on its rank, and whether its step overlapped (an op of the step ran with a collective under it).
struct TimedOp {
    std::string name;
    double flops, seconds, under_comm;
    bool overlapped_step = false;
};

std::vector<TimedOp> timed_ops(const prof::TraceStore& store) {
    std::vector<TimedOp> out;
    for (int r : store.ranks()) {
        const prof::RankTrace* rt = store.rank(r);
        if (!rt) continue;
        std::vector<std::pair<int64_t, int64_t>> comm;
        for (const prof::Span& s : rt->lanes[size_t(prof::Lane::comm)].spans())
            if (s.kind == prof::SpanKind::comm && s.group == uint8_t(prof::GroupKind::dp) && s.bytes >= 4096)
                comm.emplace_back(s.begin, s.end);
        std::map<int32_t, std::vector<TimedOp>> steps;
        for (const prof::Span& s : rt->lanes[size_t(prof::Lane::compute)].spans()) {
            if (s.kind != prof::SpanKind::op || s.flops == 0 || s.step < 2 || s.end <= s.begin) continue;
            int64_t under = 0;
            for (const auto& [b, e] : comm) under += std::max<int64_t>(0, std::min(e, s.end) - std::max(b, s.begin));
            steps[s.step].push_back({store.name(s.name), double(s.flops), double(s.duration()) * 1e-9,
                                     std::min(1.0, double(under) / double(s.duration()))});
        }
        for (auto& [step, ops] : steps) {
            const bool overlapped =
                std::any_of(ops.begin(), ops.end(), [](const TimedOp& op) { return op.under_comm >= 0.9; });
            for (TimedOp& op : ops) op.overlapped_step = overlapped, out.push_back(std::move(op));
        }
    }
    return out;
}

}  // namespace

double overlap_slowdown(const prof::TraceStore& alternating) {
    const std::vector<TimedOp> ops = timed_ops(alternating);
    // Each op's rate in the steps without overlap, by name (its layers and steps together).
    std::map<std::string, std::pair<double, double>> blocking_rate;  // flops, seconds
    for (const TimedOp& op : ops)
        if (!op.overlapped_step) {
            auto& [flops, seconds] = blocking_rate[op.name];
            flops += op.flops, seconds += op.seconds;
        }
    auto expected_s = [&](const TimedOp& op) {
        const auto it = blocking_rate.find(op.name);
        return it == blocking_rate.end() ? 0.0 : op.flops * it->second.second / it->second.first;
    };
    // What else moved the machine's speed between the two kinds of step (a shared machine drifts): the overlapped
    // steps' ops with nothing under them (their forward) against the same ops in the other steps.
    double free_expected = 0, free_seconds = 0, under_expected = 0, under_seconds = 0;
    for (const TimedOp& op : ops) {
        const double e = op.overlapped_step ? expected_s(op) : 0.0;
        if (e <= 0) continue;
        if (op.under_comm == 0) free_expected += e, free_seconds += op.seconds;
        if (op.under_comm >= 0.9) under_expected += e, under_seconds += op.seconds;
    }
    if (free_seconds <= 0 || under_seconds <= 0) return -1;  // nothing measured
    const double drift = free_expected / free_seconds;       // > 1: the overlapped steps found the machine faster
    // Of the time ops ran with a collective under them, the part beyond what they took alone.
    return std::clamp(1.0 - under_expected / drift / under_seconds, 0.0, 0.95);
}

double best_step_compute_s(const prof::TraceStore& store) {
    const prof::Report report = prof::build_report(store);
    double total = 0;
    for (const prof::RankReport& rr : report.ranks) {
        double best = 1e300;
        for (const prof::StepBreakdown& s : rr.steps)
            if (s.step >= 2 && s.compute_s > 0) best = std::min(best, s.compute_s);
        if (best < 1e300) total += best;
    }
    return total;
}

void OpCostFit::add_run(const prof::TraceStore& store, const predict::ModelDesc& model, const predict::Layout& layout) {
    // Per rank, the steady step with the least op time, and every op class and GEMM size from that one step: on a
    // shared machine other work stretches some steps, and the best whole step is what a prediction of the best
    // step must price. (Each class's own best step, from different steps, sums to less than any step that ran.)
    const prof::Report report = prof::build_report(store);
    std::map<int, Bin> bins(m_gemm_bins.begin(), m_gemm_bins.end());
    constexpr int kClasses = int(prof::OpClass::count);
    for (const prof::RankReport& rr : report.ranks) {
        const prof::RankTrace* rt = store.rank(rr.rank);
        if (!rt) continue;
        int step = -1;
        double least = 1e300, idle_ratio = 0;
        for (const prof::StepBreakdown& s : rr.steps)
            if (s.step >= 2 && s.compute_s > 0 && s.compute_s < least)
                least = s.compute_s, step = s.step, idle_ratio = s.idle_s / s.compute_s;
        if (step < 0) continue;
        std::array<double, kClasses> times{};
        std::map<int, Bin> step_bins;
        double attention_flops = 0;
        for (const prof::Span& s : rt->lanes[size_t(prof::Lane::compute)].spans()) {
            if (s.kind != prof::SpanKind::op || s.step != step) continue;
            const double sec = double(s.duration()) * 1e-9;
            times[size_t(s.op)] += sec;
            if (s.op == prof::OpClass::gemm && s.flops > 0) {
                Bin& b = step_bins[int(std::lround(2 * std::log2(double(s.flops))))];
                b.flops += double(s.flops), b.seconds += sec, ++b.spans;
            }
            if (s.op == prof::OpClass::attention) attention_flops += double(s.flops);
        }
        for (const auto& [key, b] : step_bins) {
            Bin& total = bins[key];
            total.flops += b.flops, total.seconds += b.seconds, total.spans += b.spans;
        }
        m_attention_s += times[size_t(prof::OpClass::attention)];
        // The recorded figures count the whole square (a diagonal chunk pair whole); the efficiency is on the FLOPs
        // the kernel executes, the convention the prediction charges (executed_attention_flops).
        m_attention_flops += attention_flops * predict::executed_over_recorded_attention(layout, model.seq, true);
        m_norm_s += times[size_t(prof::OpClass::norm)];
        m_elementwise_s += times[size_t(prof::OpClass::activation)];
        m_embedding_s += times[size_t(prof::OpClass::embedding)];
        m_loss_s += times[size_t(prof::OpClass::loss)];
        m_optimizer_s += times[size_t(prof::OpClass::optimizer)];
        // What the ops of one step touched, by the planner's own inventory for this rank's stage.
        const int stage = rr.coords.pp.value_or(0);
        const predict::RankShapes r = predict::rank_shapes(model, layout, stage);
        const predict::WorkInventory w = predict::work_inventory(model, layout, r);
        const double mb = double(layout.grad_accum);
        m_norm_elements += mb * (double(r.layers) * w.norm_elements + (r.last ? w.final_norm_elements : 0));
        m_elementwise_elements += mb * double(r.layers) * w.elementwise_elements;
        m_embedding_elements += mb * (r.first ? w.embedding_elements : 0);
        m_loss_elements += mb * (r.last ? w.loss_elements : 0);
        m_optimizer_params +=
            layout.parallel.zero >= 1 ? double(r.params) / (layout.parallel.dp * layout.parallel.cp) : double(r.params);
        // Host overhead: idle time between ops over op time, in that step.
        m_idle_s += idle_ratio;
        m_compute_s += 1;
    }
    m_gemm_bins.assign(bins.begin(), bins.end());
    ++m_runs;
}

void OpCostFit::finish(predict::ClusterDesc& c) const {
    US_CHECK_INPUT(m_runs > 0 && !m_gemm_bins.empty() && m_compute_s > 0,
                   "calibration: the measured runs recorded no GEMMs in their steady steps (run more --steps)");
    double peak = 0;
    for (const auto& [key, b] : m_gemm_bins)
        if (b.spans >= 2) peak = std::max(peak, b.flops / b.seconds);
    US_CHECK_INPUT(peak > 0, "calibration: too few GEMMs per size to measure a throughput");
    c.peak_flops_fp32 = peak;
    // The measured runs are fp32: bf16 is given the same peak. Where the engine's AVX-512 BF16 kernel runs
    // (docs/architecture.md) bf16 GEMMs are 2-4x faster, which this file does not know (docs/planner.md).
    c.peak_flops_bf16 = peak;
    c.gemm_efficiency.clear();
    for (const auto& [key, b] : m_gemm_bins)
        if (b.spans >= 2) c.gemm_efficiency.emplace_back(b.flops / b.spans, b.flops / b.seconds / peak);
    std::sort(c.gemm_efficiency.begin(), c.gemm_efficiency.end());
    auto ratio = [](double s, double n, double fallback) { return n > 0 && s > 0 ? s / n : fallback; };
    c.attention_efficiency = m_attention_flops > 0 ? m_attention_flops / m_attention_s / peak : c.attention_efficiency;
    c.attention_length_efficiency.clear();  // this machine's kernel, measured as it runs
    c.norm_s = ratio(m_norm_s, m_norm_elements, c.norm_s);
    c.elementwise_s = ratio(m_elementwise_s, m_elementwise_elements, c.elementwise_s);
    c.embedding_s = ratio(m_embedding_s, m_embedding_elements, c.embedding_s);
    c.loss_s = ratio(m_loss_s, m_loss_elements, c.loss_s);
    c.optimizer_s = ratio(m_optimizer_s, m_optimizer_params, c.optimizer_s);
    c.host_overhead = m_idle_s / m_compute_s;
    c.overlap_slowdown = 0;  // not separated: the measured op times carry what this machine's overlapped runs had
    c.naive_attention_skips_masked = true;  // the CPU engine's naive kernel takes query rows against visible keys
    c.calibrated = true;
}

}  // namespace us::plan
