#include "app/plan/predicted_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "app/plan/model_shapes.h"
#include "common/core/check.h"
#include "common/settings/cli.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/trace_file.h"

namespace us::plan {

namespace {

using prof::Lane;
using prof::OpClass;
using prof::Phase;
using prof::SpanKind;

constexpr int kGroupDp = 1, kGroupPp = 2, kGroupTp = 3, kGroupCp = 4, kGroupEp = 5;
constexpr int64_t kOriginNs = 1'000'000'000;  // the predicted clock starts at 1 s (0 reads as "no time")

// One piece of an action, in the order it runs. Comm pieces on the critical path stop compute (tp, ep, exposed
// cp); `hidden_comm` pieces run on the comm lane beside the compute piece they hide behind.
struct Piece {
    std::string name;
    OpClass op = OpClass::none;
    double seconds = 0;
    int group = -1;           // >= 0: a collective of this group on the comm lane (compute waits for it)
    int layer = -1;
    double hidden_comm_s = 0;  // a collective of `hidden_group` running behind this compute piece
    int hidden_group = -1;
    std::string hidden_name;
    uint64_t flops = 0;
    uint64_t bytes = 0;        // what the rank sends for the collective (ring algorithms)
};

// One rank's records, with names interned and the memory counts kept running.
class RankWriter {
public:
    explicit RankWriter(int64_t origin) : m_origin(origin) {}

    int64_t ns(double s) const { return m_origin + int64_t(std::llround(s * 1e9)); }

    void span(Lane lane, SpanKind kind, Phase phase, OpClass op, double b, double e, const std::string& name, int step,
              int micro_batch = -1, int layer = -1, int chunk = 0, int group = 0, int peer = -1, uint64_t bytes = 0,
              uint64_t flops = 0) {
        prof::EventRecord r{};
        prof::SpanRecord& s = r.span;
        s.type = uint8_t(prof::EventType::span);
        s.lane = uint8_t(lane), s.kind = uint8_t(kind), s.phase = uint8_t(phase), s.op = uint8_t(op);
        s.group = uint8_t(std::max(0, group)), s.chunk = uint8_t(chunk), s.thread = 0;
        s.begin_ns = ns(b), s.end_ns = std::max(s.begin_ns, ns(e));
        s.bytes = bytes, s.flops = flops, s.name = id(name), s.step = step;
        s.micro_batch = int16_t(micro_batch), s.layer = int16_t(layer), s.peer = int16_t(peer);
        m_batch.events.push_back(r);
    }

    void memory(MemCategory c, double t, int64_t delta, const std::string& label, Phase phase, int step,
                int micro_batch = -1, int layer = -1) {
        if (delta == 0) return;
        m_category[size_t(c)] += delta;
        m_total += delta;
        prof::EventRecord r{};
        prof::MemoryRecord& m = r.memory;
        m.type = uint8_t(prof::EventType::memory);
        m.category = uint8_t(c), m.phase = uint8_t(phase);
        m.t_ns = ns(t), m.delta_bytes = delta, m.category_bytes = m_category[size_t(c)], m.total_bytes = m_total;
        m.label = id(label), m.step = step, m.micro_batch = int16_t(micro_batch), m.layer = int16_t(layer);
        m_batch.events.push_back(r);
    }

    void counter(const std::string& name, double t, double value, int step) {
        prof::EventRecord r{};
        r.counter.type = uint8_t(prof::EventType::counter);
        r.counter.t_ns = ns(t), r.counter.value = value, r.counter.name = id(name), r.counter.step = step;
        m_batch.events.push_back(r);
    }

    prof::EventBatch take() { return std::move(m_batch); }

private:
    uint32_t id(const std::string& text) {
        auto [it, inserted] = m_ids.try_emplace(text, uint32_t(m_ids.size()));
        if (inserted) m_batch.strings.push_back({it->second, text});
        return it->second;
    }

    int64_t m_origin;
    prof::EventBatch m_batch;
    std::unordered_map<std::string, uint32_t> m_ids;
    std::array<int64_t, kMemCategoryCount> m_category{};
    int64_t m_total = 0;
};

// The ultrascope-train config of an engine model's layout (the report predicts its memory from it, as for a run);
// null for other models.
nlohmann::json engine_config(const ModelDesc& m, const Layout& l) {
    if (m.family != ModelFamily::engine_gpt) return nullptr;
    std::vector<std::string> args = {"ultrascope-train"};
    std::istringstream flags(l.flags() + fmt::format(" --layers {} --hidden {} --heads {} --vocab {} --seq {}",
                                                     m.layers, m.hidden, m.heads, m.vocab, m.seq));
    for (std::string w; flags >> w;) args.push_back(w);
    if (m.is_moe())
        for (auto [flag, v] : {std::pair{"--moe-experts", m.moe_experts}, {"--moe-topk", m.moe_topk}, {"--moe-every", m.moe_every}})
            args.insert(args.end(), {flag, std::to_string(v)});
    if (m.moe_capacity_factor > 0) args.insert(args.end(), {"--moe-capacity-factor", fmt::format("{}", m.moe_capacity_factor)});
    if (!l.overlap) args.push_back("--no-overlap");
    args.insert(args.end(), {"--bucket-mb", fmt::format("{}", l.bucket_mb)});
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
        return parse_train_args(int(argv.size()), argv.data()).cmd.config.to_json();
    } catch (const UserError&) {
        return nullptr;  // a layout only the planner can describe (more GPUs than the engine runs, ...)
    }
}

// What one action of one virtual stage runs, piece by piece, before scaling to the action's simulated length.
class ActionPieces {
public:
    ActionPieces(const ModelDesc& m, const ClusterDesc& c, const Layout& l, const StageCost& cost, const RankShapes& r,
                 int64_t first_layer, bool detailed)
        : m_m(m), m_c(c), m_l(l), m_cost(cost), m_r(r), m_first_layer(first_layer), m_detailed(detailed),
          m_w(work_inventory(m, l, r)), m_peak(c.peak_flops(l.bf16)), m_overhead(1.0 + c.host_overhead) {}

    std::vector<Piece> forward() const {
        if (!m_detailed)
            return coarse({{"GEMMs", OpClass::gemm, m_cost.gemm_f}, {"attention", OpClass::attention, m_cost.attn_f},
                           {"other ops", OpClass::activation, m_cost.other_f}},
                          m_cost.tp_f, m_cost.ep_f, m_cost.cp_exposed_f, m_cost.cp_hidden / 3);
        std::vector<Piece> p;
        if (m_r.first) p.push_back({"embedding", OpClass::embedding, m_w.embedding_elements * m_c.embedding_s / 3 * m_overhead});
        const double per_layer_tp = tp_forward_per_layer(), layers = double(std::max<int64_t>(1, m_r.layers));
        for (int64_t i = 0; i < m_r.layers; ++i) {
            const int layer = int(std::min(m_m.layers - 1, m_first_layer + i));
            const bool moe = m_m.is_moe_layer(layer);
            const auto& g = moe ? m_w.moe_layer_gemms : m_w.layer_gemms;
            add(p, "norm 1", OpClass::norm, norm_s(), layer);
            add(p, "qkv", OpClass::gemm, gemm(g[0]), layer, g[0]);
            Piece attn{"attention", OpClass::attention, m_cost.attn_f / layers, -1, layer};
            attn.flops = uint64_t(m_w.attention_flops);
            if (m_l.cp > 1) attn.hidden_comm_s = m_cost.cp_hidden / 3 / layers, attn.hidden_group = kGroupCp,
                            attn.hidden_name = "cp ring: key/value blocks";
            p.push_back(attn);
            if (m_cost.cp_exposed_f > 0) p.push_back({"cp ring (exposed)", OpClass::send, m_cost.cp_exposed_f / layers, kGroupCp, layer});
            add(p, "attention out", OpClass::gemm, gemm(g[1]), layer, g[1]);
            tp(p, per_layer_tp / 2, layer);
            add(p, "residual", OpClass::activation, elementwise_s() / 2, layer);
            add(p, "norm 2", OpClass::norm, norm_s(), layer);
            if (moe) {
                add(p, "router", OpClass::gemm, gemm(g[2]), layer, g[2]);
                ep(p, "ep all-to-all: dispatch", layer);
                for (size_t k = 3; k < g.size(); ++k) add(p, k == 3 ? "experts up" : "experts down", OpClass::gemm, gemm(g[k]), layer, g[k]);
                ep(p, "ep all-to-all: combine", layer);
            } else {
                add(p, "mlp up", OpClass::gemm, gemm(g[2]), layer, g[2]);
                add(p, m_m.swiglu ? "swiglu" : "gelu", OpClass::activation, elementwise_s() / 2, layer);
                add(p, "mlp down", OpClass::gemm, gemm(g[3]), layer, g[3]);
            }
            tp(p, per_layer_tp / 2, layer);
        }
        if (m_r.last) {
            add(p, "final norm", OpClass::norm, m_w.final_norm_elements * m_c.norm_s / 3 * m_overhead, -1);
            for (const Gemm& h : m_w.head_gemms) add(p, "head", OpClass::gemm, gemm(h), -1, h);
            add(p, "loss", OpClass::loss, m_w.loss_elements * m_c.loss_s / 3 * m_overhead, -1);
        }
        if (m_cost.tp_vocab > 0) p.push_back({"tp all-reduce (vocabulary)", OpClass::all_reduce, m_cost.tp_vocab, kGroupTp});
        return p;
    }

    // `input` / `weight`: the parts a split schedule (zb1) runs as B and W; both for a whole backward.
    std::vector<Piece> backward(bool input, bool weight) const {
        const double gemm_share = (input ? 0.5 : 0.0) + (weight ? 0.5 : 0.0);
        if (!m_detailed) {
            std::vector<Piece> p = coarse({{"GEMMs", OpClass::gemm, m_cost.gemm_b * gemm_share}}, 0, 0, 0, 0);
            if (!input) return p;
            std::vector<Piece> rest =
                coarse({{"recompute", OpClass::gemm, m_cost.recompute}, {"attention", OpClass::attention, m_cost.attn_b},
                        {"other ops", OpClass::activation, m_cost.other_b}},
                       m_cost.tp_b, m_cost.ep_b, m_cost.cp_exposed_b, m_cost.cp_hidden * 2 / 3);
            p.insert(p.end(), rest.begin(), rest.end());
            return p;
        }
        std::vector<Piece> p;
        const std::string suffix = input && weight ? "" : input ? " (input grad)" : " (weight grad)";
        auto gemm_b = [&](const char* name, const Gemm& g, int layer) {
            add(p, std::string(name) + suffix, OpClass::gemm, 2 * gemm(g) * gemm_share, layer, g, 2 * gemm_share);
        };
        if (m_r.last) {
            if (input) add(p, "loss", OpClass::loss, 2 * m_w.loss_elements * m_c.loss_s / 3 * m_overhead, -1);
            for (const Gemm& h : m_w.head_gemms) gemm_b("head", h, -1);
            if (input) add(p, "final norm", OpClass::norm, 2 * m_w.final_norm_elements * m_c.norm_s / 3 * m_overhead, -1);
        }
        const double layers = double(std::max<int64_t>(1, m_r.layers));
        const double per_layer_tp = input ? (m_cost.tp_b - (m_l.recompute == "full" ? m_cost.tp_f : 0)) / layers : 0;
        for (int64_t i = m_r.layers - 1; i >= 0; --i) {
            const int layer = int(std::min(m_m.layers - 1, m_first_layer + i));
            const bool moe = m_m.is_moe_layer(layer);
            const auto& g = moe ? m_w.moe_layer_gemms : m_w.layer_gemms;
            if (input && m_cost.recompute > 0) {
                add(p, m_l.recompute == "full" ? "recompute layer" : "recompute scores", OpClass::attention,
                    m_cost.recompute / layers, layer);
                if (m_l.recompute == "full") tp(p, tp_forward_per_layer(), layer);
            }
            if (input) tp(p, per_layer_tp / 2, layer);
            if (moe) {
                if (input) ep(p, "ep all-to-all: combine grad", layer);
                for (size_t k = g.size() - 1; k >= 3; --k) gemm_b(k == 3 ? "experts up" : "experts down", g[k], layer);
                if (input) ep(p, "ep all-to-all: dispatch grad", layer);
                gemm_b("router", g[2], layer);
            } else {
                gemm_b("mlp down", g[3], layer);
                if (input) add(p, m_m.swiglu ? "swiglu" : "gelu", OpClass::activation, 2 * elementwise_s() / 2, layer);
                gemm_b("mlp up", g[2], layer);
            }
            if (input) {
                add(p, "norm 2", OpClass::norm, 2 * norm_s(), layer);
                add(p, "residual", OpClass::activation, 2 * elementwise_s() / 2, layer);
                tp(p, per_layer_tp / 2, layer);
            }
            gemm_b("attention out", g[1], layer);
            if (input) {
                Piece attn{"attention", OpClass::attention, m_cost.attn_b / layers, -1, layer};
                if (m_l.cp > 1) attn.hidden_comm_s = m_cost.cp_hidden * 2 / 3 / layers, attn.hidden_group = kGroupCp,
                                attn.hidden_name = "cp ring: key/value and gradient blocks";
                p.push_back(attn);
                if (m_cost.cp_exposed_b > 0) p.push_back({"cp ring (exposed)", OpClass::send, m_cost.cp_exposed_b / layers, kGroupCp, layer});
            }
            gemm_b("qkv", g[0], layer);
            if (input) add(p, "norm 1", OpClass::norm, 2 * norm_s(), layer);
        }
        if (m_r.first && input) add(p, "embedding", OpClass::embedding, 2 * m_w.embedding_elements * m_c.embedding_s / 3 * m_overhead, -1);
        return p;
    }

private:
    double gemm(const Gemm& g) const { return g.count * g.flops() / (m_peak * m_c.gemm_eff(g.flops())) * m_overhead; }
    double norm_s() const { return m_w.norm_elements / 2 * m_c.norm_s / 3 * m_overhead; }
    double elementwise_s() const { return m_w.elementwise_elements * m_c.elementwise_s / 3 * m_overhead; }
    double tp_forward_per_layer() const {
        return m_r.layers > 0 ? (m_cost.tp_f - m_cost.tp_vocab) / double(m_r.layers) : 0;
    }
    void add(std::vector<Piece>& p, const std::string& name, OpClass op, double s, int layer, const Gemm& g = {},
             double flops_factor = 1) const {
        Piece piece{name, op, s, -1, layer};
        if (op == OpClass::gemm) piece.flops = uint64_t(g.count * g.flops() * flops_factor);
        p.push_back(piece);
    }
    // One all-reduce of the residual stream (T h), or with sp its all-gather and reduce-scatter: 2 (n - 1) / n of it sent.
    void tp(std::vector<Piece>& p, double s, int layer) const {
        if (s <= 0) return;
        Piece c{m_l.sp ? "tp all-gather / reduce-scatter" : "tp all-reduce",
                m_l.sp ? OpClass::reduce_scatter : OpClass::all_reduce, s, kGroupTp, layer};
        c.bytes = uint64_t(2.0 * (m_l.tp - 1) / m_l.tp * double(m_r.T * m_m.hidden) * (m_l.bf16 ? 2 : 4));
        p.push_back(c);
    }
    void ep(std::vector<Piece>& p, const char* name, int layer) const {
        if (m_l.ep <= 1 || m_r.moe_layers == 0) return;
        Piece c{name, OpClass::all_to_all, (m_cost.ep_f / 2) / double(m_r.moe_layers), kGroupEp, layer};
        c.bytes = uint64_t(double(m_r.expert_rows) * double(m_m.hidden) * (m_l.bf16 ? 2 : 4) * (m_l.ep - 1) / m_l.ep);
        p.push_back(c);
    }
    // One piece per kind, the collectives after the compute they follow.
    std::vector<Piece> coarse(std::vector<Piece> compute, double tp_s, double ep_s, double cp_exposed_s,
                              double cp_hidden_s) const {
        if (cp_hidden_s > 0)
            for (Piece& c : compute)
                if (c.op == OpClass::attention) c.hidden_comm_s = cp_hidden_s, c.hidden_group = kGroupCp, c.hidden_name = "cp ring";
        if (tp_s > 0) compute.push_back({"tp collectives", OpClass::all_reduce, tp_s, kGroupTp});
        if (ep_s > 0) compute.push_back({"ep all-to-alls", OpClass::all_to_all, ep_s, kGroupEp});
        if (cp_exposed_s > 0) compute.push_back({"cp ring (exposed)", OpClass::send, cp_exposed_s, kGroupCp});
        return compute;
    }

    const ModelDesc& m_m;
    const ClusterDesc& m_c;
    const Layout& m_l;
    const StageCost& m_cost;
    const RankShapes& m_r;
    int64_t m_first_layer;
    bool m_detailed;
    WorkInventory m_w;
    double m_peak, m_overhead;
};

// The first layer of virtual stage `vs` (model_shapes.cpp lays stages out the same way).
int64_t first_layer_of(const ModelDesc& m, const Layout& l, int chunks, int vs) {
    const int64_t stages = int64_t(l.pp) * chunks, per_chunk = (m.layers + stages - 1) / stages;
    return std::min(m.layers - 1, int64_t(vs) * per_chunk);
}

struct RankContext {
    MemoryEstimate memory;
    double activation_unit = 0;  // bytes one (micro-batch, chunk) holds
};

void draw_action(RankWriter& w, const ModelDesc& m, const ClusterDesc& c, const Layout& l, const StepModel& sm,
                 const TimedAction& ta, double offset, int step, bool detailed, const RankContext& rc) {
    const int pp = l.pp, vs = ta.action.chunk * pp + ta.rank, S = pp * sm.chunks;
    const RankShapes r = pp > 1 ? chunk_shapes(m, l, ta.rank, ta.action.chunk) : rank_shapes(m, l, ta.rank);
    const ActionPieces pieces(m, c, l, sm.chunk[size_t(vs)], r, first_layer_of(m, l, sm.chunks, vs), detailed);
    const PipeOp op = ta.action.op;
    const bool forward = op == PipeOp::forward;
    const std::vector<Piece> list = forward ? pieces.forward()
                                            : pieces.backward(op != PipeOp::backward_weight, op != PipeOp::backward_input);
    const Phase phase = forward ? Phase::forward : Phase::backward;
    const int mb = ta.action.micro_batch, chunk = ta.action.chunk;
    const double b = offset + ta.begin, e = offset + ta.end;
    // Named as the engine's pipeline executor names its actions, so the schedule diagram reads them the same way.
    w.span(Lane::compute, SpanKind::phase, phase, OpClass::none, b, e, forward ? "F" : op == PipeOp::backward_weight ? "W" : "B",
           step, mb, -1, chunk);
    // Scale the pieces to the simulated action (they are its own costs: the factor is 1 up to rounding).
    double total = 0;
    for (const Piece& p : list) total += p.seconds;
    const double scale = total > 0 ? (e - b) / total : 0;
    // Activations follow the layers: kept as forward passes each one, given back as backward leaves it; what the
    // layer loop does not hand out (coarse pieces, the ends of the model) settles at the action's end.
    const bool frees = !forward && op != PipeOp::backward_weight;
    const int64_t unit = int64_t(rc.activation_unit);
    const int64_t per_layer = unit / std::max<int64_t>(1, r.layers);
    int64_t moved = 0;
    auto layer_done = [&](int layer, double at) {
        if (layer < 0 || !(forward || frees)) return;
        w.memory(MemCategory::activations, at, forward ? per_layer : -per_layer, "saved activations", phase, step, mb, layer);
        moved += per_layer;
    };
    if (frees) w.memory(MemCategory::temporaries, b, rc.memory.bytes[size_t(MemCategory::temporaries)], "backward scratch", phase, step, mb);
    double t = b;
    int open_layer = -1;
    double layer_begin = b;
    for (const Piece& p : list) {
        const double d = p.seconds * scale;
        if (p.layer != open_layer) {
            if (open_layer >= 0) {
                w.span(Lane::compute, SpanKind::layer, phase, OpClass::none, layer_begin, t, fmt::format("layer {}", open_layer),
                       step, mb, open_layer, chunk);
                layer_done(open_layer, t);
            }
            open_layer = p.layer, layer_begin = t;
        }
        if (p.group >= 0) {
            w.span(Lane::comm, SpanKind::comm, phase, p.op, t, t + d, p.name, step, mb, p.layer, chunk, p.group, -1, p.bytes);
        } else {
            w.span(Lane::compute, SpanKind::op, phase, p.op, t, t + d, p.name, step, mb, p.layer, chunk, 0, -1, 0, p.flops);
            if (p.hidden_comm_s > 0)
                w.span(Lane::comm, SpanKind::comm, phase, OpClass::send, t, t + std::min(d, p.hidden_comm_s * scale), p.hidden_name,
                       step, mb, p.layer, chunk, p.hidden_group);
        }
        t += d;
    }
    if (open_layer >= 0) {
        w.span(Lane::compute, SpanKind::layer, phase, OpClass::none, layer_begin, e, fmt::format("layer {}", open_layer), step, mb,
               open_layer, chunk);
        layer_done(open_layer, e);
    }
    if (forward) w.memory(MemCategory::activations, e, unit - moved, "saved activations", phase, step, mb);
    if (frees) {
        w.memory(MemCategory::activations, e, -(unit - moved), "saved activations", phase, step, mb);
        w.memory(MemCategory::temporaries, e, -rc.memory.bytes[size_t(MemCategory::temporaries)], "backward scratch", phase, step, mb);
    }
    // Pipeline hand-overs: the activation to the next virtual stage, the gradient to the previous one.
    if (pp > 1) {
        const bool sends = forward ? vs < S - 1 : op != PipeOp::backward_weight && vs > 0;
        if (sends) {
            const int peer = forward ? (ta.rank + 1) % pp : (ta.rank + pp - 1) % pp;
            w.span(Lane::p2p, SpanKind::comm, phase, OpClass::send, e, e + sm.transfer_s,
                   forward ? "send activation" : "send gradient", step, mb, -1, chunk, kGroupPp, peer,
                   uint64_t(double(r.R * m.hidden) * (l.bf16 ? 2 : 4)));
        }
    }
}

// Forward actions done minus backward actions done, at its largest: the (micro-batch, chunk) pairs a rank holds.
int max_in_flight(const StepModel& sm, int rank) {
    int held = 0, most = 1;
    for (const TimedAction& a : sm.pipeline.actions) {
        if (a.rank != rank) continue;
        if (a.action.op == PipeOp::forward) most = std::max(most, ++held);
        else if (a.action.op != PipeOp::backward_weight) --held;
    }
    return most;
}

std::vector<prof::Chunk> rank_chunks(const ModelDesc& m, const ClusterDesc& c, const PlanResult& plan, int64_t gpus,
                                     const StepModel& sm, int stage, const PredictedTraceOptions& o) {
    const Layout& l = plan.layout;
    RankWriter w(kOriginNs);
    RankContext rc;
    rc.memory = estimate_stage_memory(m, c, l, stage);
    rc.activation_unit = double(rc.memory.bytes[size_t(MemCategory::activations)]) / max_in_flight(sm, stage);
    const RankShapes shapes = rank_shapes(m, l, stage);
    const bool detailed = int64_t(l.grad_accum) * shapes.layers <= o.max_detailed_layer_passes;
    const DpCost& dp = sm.dp[size_t(stage)];
    const double finish = sm.pipeline.finish[size_t(stage)];
    // The model states live for the whole trace.
    for (MemCategory cat : {MemCategory::params, MemCategory::grads, MemCategory::master_params, MemCategory::optimizer_state,
                            MemCategory::comm_buffers})
        w.memory(cat, 0, rc.memory.bytes[size_t(cat)], std::string(mem_category_name(cat)), Phase::none, 0);
    for (int step = 1; step <= o.steps; ++step) {
        const double offset = double(step - 1) * sm.step_s;
        w.span(Lane::host, SpanKind::step, Phase::none, OpClass::none, offset, offset + sm.step_s, fmt::format("step {}", step), step);
        const TimedAction* last_backward = nullptr;
        for (const TimedAction& a : sm.pipeline.actions) {
            if (a.rank != stage) continue;
            draw_action(w, m, c, l, sm, a, offset, step, detailed, rc);
            if (a.action.op != PipeOp::forward) last_backward = &a;
        }
        // Data parallelism: the part of the reduction behind the last backward, then what stays exposed.
        // Bytes the rank sends for it (ring): 2 (n - 1) / n of the gradients for an all-reduce, half that for a
        // reduce-scatter, shared between the hidden and the exposed spans by their time.
        const int n = l.dp * l.cp;
        const double grad_bytes = double(shapes.params + shapes.expert_params) * (l.bf16 && !l.fp32_grad_accum ? 2 : 4);
        const double sent = n > 1 ? (l.zero >= 1 ? 1.0 : 2.0) * (n - 1) / n * grad_bytes : 0.0;
        const double dp_total = dp.hidden + dp.exposed;
        auto share = [&](double s) { return uint64_t(dp_total > 0 ? sent * s / dp_total : 0); };
        if (dp.hidden > 0 && last_backward) {
            const double end = offset + last_backward->end, begin = std::max(offset + last_backward->begin, end - dp.hidden);
            w.span(Lane::comm, SpanKind::comm, Phase::backward, l.zero >= 1 ? OpClass::reduce_scatter : OpClass::all_reduce, begin,
                   end, "dp gradient buckets (behind backward)", step, -1, -1, 0, kGroupDp, -1, share(dp.hidden));
        }
        double t = offset + finish;
        if (dp.exposed > 0) {
            w.span(Lane::comm, SpanKind::comm, Phase::backward, l.zero >= 1 ? OpClass::all_gather : OpClass::all_reduce, t,
                   t + dp.exposed, l.zero >= 1 ? "dp reduction / ZeRO gather (exposed)" : "dp all-reduce (exposed)", step, -1, -1,
                   0, kGroupDp, -1, share(dp.exposed));
            t += dp.exposed;
        }
        w.span(Lane::compute, SpanKind::phase, Phase::optimizer, OpClass::none, t, t + dp.optimizer, "optimizer", step);
        w.span(Lane::compute, SpanKind::op, Phase::optimizer, OpClass::optimizer, t, t + dp.optimizer, "adamw", step);
        w.counter("step_ms", offset + sm.step_s, sm.step_s * 1e3, step);
        w.counter("tokens_per_s", offset + sm.step_s, plan.tokens_per_s, step);
    }

    nlohmann::json grid = {{"dp", l.dp}, {"pp", l.pp}, {"tp", l.tp}, {"cp", l.cp}, {"ep", l.ep}};
    nlohmann::json meta = {
        {"format", "ultrascope-rank-metadata"},
        {"rank", stage},
        {"world_size", l.pp},
        {"coords", {{"dp", 0}, {"pp", stage}, {"tp", 0}, {"cp", 0}, {"ep", 0}}},
        {"grid", grid},
        {"host", "predicted"},
        {"device", c.gpu_name.empty() ? c.name : c.gpu_name},
        {"backend", "predicted"},
        {"device_peak_gflops", c.peak_flops(l.bf16) / 1e9},
        {"device_peak_source", "cluster description " + c.name},
        {"tokens_per_step", plan.tokens_per_step},
        {"params", m.num_params()},
        {"predicted",
         {{"model", m.name},
          {"cluster", c.name},
          {"gpus", gpus},
          {"layout", l.describe()},
          {"flags", l.flags()},
          {"step_s", sm.step_s},
          {"model_flops_per_token", plan.model_flops_per_token},
          {"shape",
           {{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"cp", l.cp}, {"ep", l.ep}, {"sp", l.sp}, {"zero", l.zero},
            {"pp_schedule", l.pp_schedule}, {"pp_chunks", l.pp > 1 ? l.pp_chunks : 1}, {"batch", l.micro_batch},
            {"grad_accum", l.grad_accum}, {"seq", m.seq}, {"layers", m.layers}}},
          {"memory_kind", rc.memory.kind},
          {"represents", fmt::format("pipeline stage {}: the rank with tp, cp, dp and ep index 0 ({} ranks do the same)",
                                     stage, gpus / std::max(1, l.pp))},
          {"detail", detailed ? "layer by layer" : "one span per kind of work per action"}}},
    };
    if (nlohmann::json cfg = engine_config(m, l); !cfg.is_null()) meta["config"] = cfg;
    std::vector<prof::Chunk> chunks(3);
    chunks[0].kind = prof::ChunkKind::metadata, chunks[0].text = meta.dump();
    prof::EventBatch batch = w.take();
    chunks[1].kind = prof::ChunkKind::events, chunks[1].strings = std::move(batch.strings), chunks[1].events = std::move(batch.events);
    chunks[2].kind = prof::ChunkKind::end, chunks[2].text = prof::end_note_json(true, 0, "");
    for (uint32_t i = 0; i < 3; ++i) chunks[i].rank = uint32_t(stage), chunks[i].sequence = i;
    return chunks;
}

}  // namespace

std::vector<prof::Chunk> predicted_trace(const ModelDesc& m, const ClusterDesc& c, const PlanResult& plan, int64_t gpus,
                                         const PredictedTraceOptions& o) {
    US_CHECK_INPUT(o.steps >= 1, "a predicted trace needs at least one step (got {})", o.steps);
    const StepModel sm = model_step(m, c, plan.layout);
    std::vector<prof::Chunk> all;
    for (int stage = 0; stage < plan.layout.pp; ++stage) {
        std::vector<prof::Chunk> r = rank_chunks(m, c, plan, gpus, sm, stage, o);
        std::move(r.begin(), r.end(), std::back_inserter(all));
    }
    return all;
}

std::unique_ptr<prof::TraceStore> predicted_store(const ModelDesc& m, const ClusterDesc& c, const PlanResult& plan,
                                                  int64_t gpus, const PredictedTraceOptions& o) {
    auto store = std::make_unique<prof::TraceStore>();
    for (const prof::Chunk& chunk : predicted_trace(m, c, plan, gpus, o)) store->add_chunk(chunk);
    store->finalize();
    return store;
}

void write_predicted_trace(const std::string& path, const ModelDesc& m, const ClusterDesc& c, const PlanResult& plan,
                           int64_t gpus, const PredictedTraceOptions& o) {
    const std::vector<prof::Chunk> chunks = predicted_trace(m, c, plan, gpus, o);
    // Written beside, then renamed: a failure leaves no half-written trace under the name asked for.
    const std::string partial = path + ".partial";
    {
        prof::TraceFileWriter writer(partial);
        for (const prof::Chunk& ch : chunks) {
            prof::EventBatch batch;
            if (ch.kind == prof::ChunkKind::events) batch.strings = ch.strings, batch.events = ch.events;
            writer.append(prof::encode_chunk(ch.kind, ch.rank, ch.sequence,
                                             ch.kind == prof::ChunkKind::events ? &batch : nullptr, ch.text));
        }
        writer.close();
        if (!writer.error().empty()) {
            std::remove(partial.c_str());
            throw UserError(fmt::format("could not write the predicted trace {}: {}", path, writer.error()));
        }
    }
    US_CHECK_INPUT(std::rename(partial.c_str(), path.c_str()) == 0, "could not write the predicted trace {}: rename failed", path);
}

}  // namespace us::plan
