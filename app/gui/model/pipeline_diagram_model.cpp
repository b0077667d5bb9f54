#include "app/gui/model/pipeline_diagram_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace us::gui {

namespace {

// Idle inside [0, 1] over busy time, per stage (boxes of one stage never overlap).
std::vector<double> bubbles_of(const std::vector<DiagramBox>& boxes, int stages) {
    std::vector<double> busy(size_t(stages), 0.0), bubble(size_t(stages), 0.0);
    for (const DiagramBox& b : boxes) busy[size_t(b.stage)] += b.end - b.start;
    for (int s = 0; s < stages; ++s)
        bubble[size_t(s)] = busy[size_t(s)] > 0 ? (1.0 - busy[size_t(s)]) / busy[size_t(s)] : 0;
    return bubble;
}

}  // namespace

PipelineDiagram theory_diagram(const predict::PredictInput& run) {
    PipelineDiagram d;
    if (run.parallel.pp <= 1) return d;
    const PipelineShape shape{run.parallel.pp, int(run.grad_accum), run.parallel.pp_chunks};
    Simulation sim;
    try {
        sim = simulate_schedule(make_schedule(run.parallel.pp_schedule, shape), shape);
    } catch (const std::exception&) {
        return d;  // the launch panel and the report say why
    }
    d.stages = run.parallel.pp;
    for (const TimedAction& a : sim.actions)
        d.boxes.push_back(
            {a.stage, a.action.op, a.action.micro_batch, a.action.chunk, a.start / sim.makespan, a.end / sim.makespan});
    d.bubble = sim.bubble;
    d.caption =
        fmt::format("predicted: {} with pp {}, m {}{} (forward 1, backward 2, no communication time)",
                    schedule_name(run.parallel.pp_schedule), run.parallel.pp, run.grad_accum,
                    run.parallel.pp_chunks > 1 ? fmt::format(", {} chunks per rank", run.parallel.pp_chunks) : "");
    return d;
}

PipelineDiagram measured_diagram(const prof::TraceStore& store, const prof::Report& report, int step) {
    PipelineDiagram d;
    const int pp = report.predict_input.parallel.pp;
    if (pp <= 1) return d;
    struct StageSpans {
        int rank = -1;
        int64_t begin = 0, end = 0;  // the rank's step window
    };
    std::vector<StageSpans> stage(static_cast<size_t>(pp));
    for (const prof::RankReport& r : report.ranks) {
        if (r.coords.dp.value_or(0) != 0) continue;
        const int s = r.coords.pp.value_or(0);
        if (s < 0 || s >= pp) continue;
        for (const prof::StepBreakdown& b : r.steps)
            if (b.step == step) stage[size_t(s)] = {r.rank, b.begin, b.end};
    }
    int64_t t0 = std::numeric_limits<int64_t>::max(), t1 = std::numeric_limits<int64_t>::min();
    struct Raw {
        DiagramBox box;
        int64_t begin, end;
    };
    std::vector<Raw> raw;
    for (int s = 0; s < pp; ++s) {
        const StageSpans& st = stage[size_t(s)];
        if (st.rank < 0) return d;  // a stage has not finished this step yet
        const prof::RankTrace* rt = store.rank(st.rank);
        if (!rt) return d;
        const auto& spans = rt->lanes[size_t(prof::Lane::compute)].spans();  // sorted by begin
        auto it = std::lower_bound(spans.begin(), spans.end(), st.begin,
                                   [](const prof::Span& x, int64_t t) { return x.begin < t; });
        for (; it != spans.end() && it->begin < st.end; ++it) {
            if (it->kind != prof::SpanKind::phase || it->micro_batch < 0) continue;
            const std::string& name = store.name(it->name);
            PipeOp op;
            if (name == "F")
                op = PipeOp::forward;
            else if (name == "B")
                op = PipeOp::backward;
            else if (name == "W")
                op = PipeOp::backward_weight;
            else
                continue;
            raw.push_back({{s, op, it->micro_batch, it->chunk, 0, 0}, it->begin, it->end});
            t0 = std::min(t0, it->begin);
            t1 = std::max(t1, it->end);
        }
    }
    if (raw.empty() || t1 <= t0) return d;
    // With W spans present, B is the input-gradient half of the backward.
    const bool split =
        std::any_of(raw.begin(), raw.end(), [](const Raw& r) { return r.box.op == PipeOp::backward_weight; });
    const double len = double(t1 - t0);
    for (Raw& r : raw) {
        if (split && r.box.op == PipeOp::backward) r.box.op = PipeOp::backward_input;
        r.box.start = double(r.begin - t0) / len;
        r.box.end = double(r.end - t0) / len;
        d.boxes.push_back(r.box);
    }
    d.stages = pp;
    d.window_ns = len;
    d.bubble = bubbles_of(d.boxes, pp);
    d.kind = store.provenance();
    d.caption = fmt::format("{}: step {} of data-parallel replica 0 (pipeline window {:.1f} ms)",
                            d.kind == "measured" ? "measured" : "predicted by the planner's model", step, len / 1e6);
    return d;
}

}  // namespace us::gui
