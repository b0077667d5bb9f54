// The context pass two of the Kineto reader works out before writing spans (kineto_span_context.h). Host spans are
// walked per thread in (begin, longest first) order with a stack, which gives each its enclosing CPU op, phase and
// collective; a collective's facts are gathered onto its outermost op; runtime calls are indexed by correlation.
#include "profiler/import/kineto_span_context.h"

#include <algorithm>
#include <fmt/format.h>

#include "profiler/import/kineto_names.h"

namespace us::prof {

int32_t KinetoSteps::step_of(int64_t t) const {
    auto it = std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, auto& s) { return v < s.begin; });
    if (it == steps.begin()) return 0;
    --it;
    return t < it->end || (it->begin == it->end && t == it->begin) ? it->step + 1 : 0;
}

KinetoSteps kineto_steps(const KinetoFile& f, std::vector<std::string>& warnings) {
    const auto& spans = f.spans;
    KinetoSteps out;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (const auto& s : spans) {
        if (s.cat == KinetoCat::step) out.steps.push_back(s);
        t0 = std::min(t0, s.begin), t1 = std::max(t1, s.end);
    }
    std::sort(out.steps.begin(), out.steps.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    if (out.steps.empty() && !spans.empty()) {
        // No prof.step(): the optimizer's steps (Optimizer.step#<Class>.step annotations) bound them, as a capture
        // derives them (profiler/capture/step_check.h): the first from the window's start, each next from the
        // previous one's end; numbered from 1 as ProfilerStep#1 would be, so none is taken for a run's first.
        std::vector<const KinetoSpan*> optimizer;
        for (const auto& s : spans)
            if (s.cat == KinetoCat::user_annotation && f.names[s.name].rfind("Optimizer.step#", 0) == 0)
                optimizer.push_back(&s);
        std::sort(optimizer.begin(), optimizer.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
        // A model that steps two optimizers an iteration (Muon and AdamW, a GAN's two) would count two steps: the
        // first optimizer's class alone ends them.
        if (!optimizer.empty())
            std::erase_if(optimizer, [&, first = optimizer.front()->name](auto* s) { return s->name != first; });
        for (const KinetoSpan* opt : optimizer) {
            if (!out.steps.empty() && opt->end <= out.steps.back().end) continue;  // inside the one before
            KinetoSpan step;
            step.begin = out.steps.empty() ? std::min(t0, opt->begin) : out.steps.back().end;
            step.end = opt->end, step.cat = KinetoCat::step, step.step = int32_t(out.steps.size() + 1);
            out.steps.push_back(step);
        }
        out.from_optimizer = !out.steps.empty();
        if (out.from_optimizer)
            warnings.push_back(fmt::format(
                "{}: no ProfilerStep events (record with prof.step() each iteration): {} steps derived from the "
                "optimizer's (Optimizer.step annotations: each ends where one ends; the time after the last is in none)",
                f.path, out.steps.size()));
    }
    out.window = out.steps.empty();
    if (out.window && !spans.empty()) {
        KinetoSpan w;
        w.begin = t0, w.end = t1, w.cat = KinetoCat::step, w.step = 0;
        out.steps.push_back(w);
        warnings.push_back(
            fmt::format("{}: no ProfilerStep events (record with prof.step() each iteration): the "
                        "whole window is one step",
                        f.path));
    }
    return out;
}

std::vector<NameFacts> kineto_name_facts(const KinetoFile& f) {
    std::vector<NameFacts> name_facts(f.names.size());
    for (size_t n = 0; n < f.names.size(); ++n) {
        const std::string& name = f.names[n];
        name_facts[n] = {is_collective_op_name(name), is_collective_wait_name(name), name.rfind("gloo:", 0) == 0,
                         is_nccl_kernel_name(name),   phase_of_annotation(name),     collective_of(name)};
    }
    return name_facts;
}

namespace {

// The walk's order: host spans per thread, by begin, the longest first among those that begin together.
std::vector<uint32_t> host_span_order(const std::vector<KinetoSpan>& spans) {
    std::vector<uint32_t> host;
    for (uint32_t i = 0; i < spans.size(); ++i)
        if (!is_device_cat(spans[i].cat) && spans[i].cat != KinetoCat::step) host.push_back(i);
    std::sort(host.begin(), host.end(), [&](uint32_t a, uint32_t b) {
        const auto &x = spans[a], &y = spans[b];
        if (x.thread != y.thread) return x.thread < y.thread;
        return x.begin != y.begin ? x.begin < y.begin : x.end > y.end;
    });
    return host;
}

// The stack walk: each host span inherits its enclosing span's context, then adds what it is itself.
void assign_host_contexts(const std::vector<KinetoSpan>& spans, const std::vector<NameFacts>& name_facts, HostWalk& w) {
    const std::vector<uint32_t>& host = w.host;
    std::vector<HostContext>& ctx = w.ctx;
    std::vector<uint32_t> stack;
    for (size_t k = 0; k < host.size(); ++k) {
        const uint32_t i = host[k];
        const KinetoSpan& s = spans[i];
        if (k > 0 && spans[host[k - 1]].thread != s.thread) stack.clear();
        while (!stack.empty() && spans[stack.back()].end <= s.begin &&
               !(spans[stack.back()].end == s.begin && spans[stack.back()].begin == s.begin))
            stack.pop_back();
        HostContext c;
        if (!stack.empty()) c = ctx[stack.back()];
        c.envelope = false;
        const NameFacts& name = name_facts[s.name];
        if (s.cat == KinetoCat::cpu_op || (s.cat == KinetoCat::user_annotation && c.parent_op < 0))
            c.parent_op = int32_t(i);
        if (c.collective < 0 && name.collective_op) c.collective = int32_t(i);
        if (name.phase != Phase::none) c.phase = name.phase;
        ctx[i] = c;
        if (name.collective_op || name.collective_wait)  // its ancestors wrap communication
            for (size_t k = stack.size(); k-- > 0 && !ctx[stack[k]].envelope;) ctx[stack[k]].envelope = true;
        // gloo's spans of asynchronous work last until it completes and overlap what the thread does next: they
        // are nobody's parent.
        if (!name.gloo) stack.push_back(i);
    }
}

// A collective nest's facts (collective, bytes, group, peers) gathered onto its outermost op.
void gather_collective_nests(const std::vector<KinetoSpan>& spans, HostWalk& w) {
    for (uint32_t i : w.host) {
        const int32_t top = w.ctx[i].collective;
        if (top < 0) continue;
        KinetoSpan& n = w.nest[size_t(top)];
        const KinetoSpan& s = spans[i];
        if (n.collective == OpClass::none) n.collective = s.collective;
        n.bytes = std::max(n.bytes, s.bytes);
        if (n.group < 0) n.group = s.group;
        if (n.peer_src < 0 && n.peer_dst < 0) n.peer_src = s.peer_src, n.peer_dst = s.peer_dst;
    }
}

// The runtime calls by correlation id, for kernels to find their launch.
void index_launches(const std::vector<KinetoSpan>& spans, HostWalk& w) {
    for (uint32_t i : w.host)
        if ((spans[i].cat == KinetoCat::cuda_runtime || spans[i].cat == KinetoCat::cuda_driver) &&
            spans[i].correlation >= 0)
            w.launch_of.emplace(spans[i].correlation, i);
}

}  // namespace

HostWalk walk_host_spans(const KinetoFile& f, const std::vector<NameFacts>& facts) {
    HostWalk w;
    w.host = host_span_order(f.spans);
    w.ctx.resize(f.spans.size());
    assign_host_contexts(f.spans, facts, w);
    w.nest.resize(f.spans.size());
    gather_collective_nests(f.spans, w);
    index_launches(f.spans, w);
    return w;
}

std::vector<bool> kineto_p2p_groups(const KinetoFile& f, const HostWalk& w, const std::vector<NameFacts>& facts) {
    std::vector<bool> p2p_groups(f.groups.size(), false);
    for (uint32_t i : w.host) {
        const KinetoSpan& s = f.spans[i];
        const OpClass op = s.collective != OpClass::none ? s.collective : facts[s.name].op;
        const int16_t g = w.ctx[i].collective >= 0 ? w.nest[size_t(w.ctx[i].collective)].group : s.group;
        if ((op == OpClass::send || op == OpClass::recv) && g >= 0) p2p_groups[size_t(g)] = true;
    }
    return p2p_groups;
}

}  // namespace us::prof
