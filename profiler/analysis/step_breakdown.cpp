#include "profiler/analysis/step_breakdown.h"

#include "profiler/analysis/core_wait.h"
#include "profiler/predict/ring_bytes.h"
#include "profiler/transport/rank_metadata.h"

#include <algorithm>
#include <map>

namespace us::prof {

namespace {

// Which set a span joins. On a traced GPU the device lanes are the truth: kernels, memcpy and memset form C and
// NCCL kernels M (sends and receives to a named peer aside, as pipeline transfers); the engine's host-side op and
// collective spans only say when work was launched. Elsewhere C holds the op spans and M the collectives of the comm
// lane.
enum class SetOf { none, compute, comm, p2p };

// With device truth, compute is the GPU's kernels; communication is the GPU's NCCL kernels when the rank has any,
// else (MPI with host staging: no communication kernels) the engine's collective spans.
SetOf set_of(const Span& s, Lane lane, bool device_truth, bool device_comm) {
    if (device_truth) {
        if (lane == Lane::device && s.kind == SpanKind::op) return SetOf::compute;
        const bool comm_lane = device_comm ? lane == Lane::device_comm : lane == Lane::comm || lane == Lane::p2p;
        // A send or receive kernel whose peer nothing names (a sampled trace's ncclKernel_SendRecv, NCCL's grouped
        // all-to-all, a cp ring's exchange) is communication of its group, not a pipeline transfer.
        const bool p2p = ((s.op == OpClass::send || s.op == OpClass::recv) && s.peer >= 0) || lane == Lane::p2p;
        if (comm_lane && s.kind == SpanKind::comm) return p2p ? SetOf::p2p : SetOf::comm;
        return SetOf::none;
    }
    // The host lane's op spans are not compute here: an imported CPU-only rank's ops around or inside a collective
    // and its waits (the Kineto reader's mapping); the engine puts a CPU's ops on the compute lane.
    if (s.kind == SpanKind::op) return lane == Lane::host ? SetOf::none : SetOf::compute;
    if (s.kind == SpanKind::comm) return lane == Lane::p2p ? SetOf::p2p : SetOf::comm;
    return SetOf::none;
}

// The size of each process group of a rank, from its metadata's grid degrees.
std::array<int, kGroupCount> group_sizes(const TraceStore& store, const RankTrace& rt) {
    std::array<int, kGroupCount> n{};
    n.fill(1);
    const GridSizes& grid = rt.info.grid;
    for (int g = 1; g < kGroupCount; ++g)
        if (const auto dim = grid_dim_of(GroupKind(g)); dim && grid[*dim]) n[size_t(g)] = *grid[*dim];
    n[0] = std::max(1, store.world_size());
    // Under context parallelism the engine's dp communicator is the dp x cp reduction group; the experts' is
    // dp/ep x cp.
    auto size = [&](GroupKind g) -> int& { return n[size_t(g)]; };
    size(GroupKind::edp) = std::max(1, size(GroupKind::dp) / size(GroupKind::ep)) * size(GroupKind::cp);
    size(GroupKind::dp) *= size(GroupKind::cp);
    size(GroupKind::embedding) = size(GroupKind::pp) > 1 ? 2 : 1;
    return n;
}

// The step windows, from the host lane's step spans, in time order.
std::vector<StepBreakdown> step_windows(const RankTrace& rt, int rank) {
    std::vector<StepBreakdown> out;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::step) {
            StepBreakdown b;
            b.rank = rank;
            b.step = s.step;
            b.begin = s.begin;
            b.end = s.end;
            out.push_back(b);
        }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    return out;
}

// What one step's spans are, before their unions: the compute set C, the communication set M, the transfers, M by
// group, and the first and last op.
struct StepSets {
    std::vector<Interval> compute, comm, p2p;
    std::array<std::vector<Interval>, kGroupCount> by_group;
    int64_t first_op = 0, last_op = 0;
};

// Every span that reaches into the step, put in its set; on the way the step's FLOPs, attention and expert time, and
// the bytes each group's collectives that began in it sent.
StepSets step_sets(const TraceStore& store, const RankTrace& rt, const std::array<int, kGroupCount>& sizes,
                   StepBreakdown& b) {
    StepSets sets;
    sets.first_op = b.end, sets.last_op = b.begin;
    const bool device_truth = rt.has_device_spans();
    const bool device_comm = !rt.lanes[size_t(Lane::device_comm)].spans().empty();
    for (int lane = 0; lane < int(Lane::count); ++lane) {
        const LaneTrack& track = rt.lanes[lane];
        const auto& spans = track.spans();
        // sorted by begin: start where a span could still reach into the window
        auto it = std::lower_bound(spans.begin(), spans.end(), b.begin - track.max_duration(),
                                   [](const Span& s, int64_t t) { return s.begin < t; });
        for (; it != spans.end() && it->begin < b.end; ++it) {
            if (it->end <= b.begin) continue;
            if (it->kind == SpanKind::op) b.flops += int64_t(it->flops);  // the engine's ops carry the FLOPs
            if (it->kind == SpanKind::op && it->op == OpClass::attention && lane != int(Lane::device) &&
                store.name(it->name).rfind("rope", 0) != 0) {
                b.attention_s += double(std::min(it->end, b.end) - std::max(it->begin, b.begin)) / 1e9;
                b.attention_flops += int64_t(it->flops);
            }
            if (it->kind == SpanKind::op && lane != int(Lane::device) && store.name(it->name).rfind("expert ", 0) == 0)
                b.experts_s += double(std::min(it->end, b.end) - std::max(it->begin, b.begin)) / 1e9;
            // Collectives by group, from the engine's comm spans (they carry group and buffer size; the GPU's
            // NCCL kernels on device_comm do not): bytes of those that began in the step, their time.
            const bool engine_comm = it->kind == SpanKind::comm && (lane == int(Lane::comm) || lane == int(Lane::p2p));
            if (engine_comm && it->group < kGroupCount) {
                if (it->begin >= b.begin)
                    b.group_bytes[it->group] += predict::bytes_sent(it->op, double(it->bytes), sizes[it->group]);
                if (lane == int(Lane::comm)) sets.by_group[it->group].emplace_back(it->begin, it->end);
            }
            switch (set_of(*it, Lane(lane), device_truth, device_comm)) {
                case SetOf::compute:
                    sets.compute.emplace_back(it->begin, it->end);
                    sets.first_op = std::min(sets.first_op, std::max(it->begin, b.begin));
                    sets.last_op = std::max(sets.last_op, std::min(it->end, b.end));
                    break;
                case SetOf::comm:
                    sets.comm.emplace_back(it->begin, it->end);
                    break;
                case SetOf::p2p:
                    sets.p2p.emplace_back(it->begin, it->end);
                    break;
                case SetOf::none:
                    break;
            }
        }
    }
    return sets;
}

// The step's figures from its sets: C, M, their overlap and what neither covers, each group's time and exposed
// part, and the bubble between the first and the last op.
void measure_step(const StepSets& sets, StepBreakdown& b) {
    const auto C = union_of(sets.compute, b.begin, b.end);
    const auto M = union_of(sets.comm, b.begin, b.end);
    std::vector<Interval> both = C;
    both.insert(both.end(), M.begin(), M.end());
    const auto CM = union_of(both, b.begin, b.end);
    const int64_t c = total_length(C), m = total_length(M), cm = total_length(CM), overlap = intersection_length(C, M);
    b.wall_s = double(b.end - b.begin) / 1e9;
    b.compute_s = double(c) / 1e9;
    b.comm_s = double(m) / 1e9;
    b.p2p_s = double(total_length(union_of(sets.p2p, b.begin, b.end))) / 1e9;
    b.overlapped_s = double(overlap) / 1e9;
    b.exposed_s = double(m - overlap) / 1e9;
    b.idle_s = double(b.end - b.begin - cm) / 1e9;
    b.overlap_pct = m > 0 ? 100.0 * double(overlap) / double(m) : 0.0;
    for (int g = 0; g < kGroupCount; ++g) {
        if (sets.by_group[size_t(g)].empty()) continue;
        const auto Mg = union_of(sets.by_group[size_t(g)], b.begin, b.end);
        const int64_t mg = total_length(Mg);
        b.group_comm_s[size_t(g)] = double(mg) / 1e9;
        b.group_exposed_s[size_t(g)] = double(mg - intersection_length(C, Mg)) / 1e9;
    }
    // The bubble is time in the window with neither compute nor communication: a stage waiting for a tensor-
    // or data-parallel collective is exposed communication, not pipeline idle.
    std::vector<Interval> busy = sets.compute;
    busy.insert(busy.end(), sets.comm.begin(), sets.comm.end());
    if (sets.last_op > sets.first_op) {
        const int64_t in_window = total_length(union_of(busy, sets.first_op, sets.last_op));
        b.bubble_s = double(sets.last_op - sets.first_op - in_window) / 1e9;
        b.bubble_fraction = c > 0 ? b.bubble_s / b.compute_s : 0.0;
        b.stage_bubble_fraction = b.bubble_fraction;
    }
    b.first_op = sets.first_op;
    b.last_op = sets.last_op;
    b.busy_set = CM;
    b.compute_set = C;
}

// Activations in flight in the step: the most forwards done whose backward (or W, when the backward is split) was
// not, from the compute lane's phase spans.
int micro_batches_in_flight(const TraceStore& store, const RankTrace& rt, const StepBreakdown& b) {
    std::vector<std::pair<int64_t, int>> marks;
    bool split = false;
    const LaneTrack& compute_lane = rt.lanes[size_t(Lane::compute)];
    if (compute_lane.rows() > 0) {
        const auto [first, last] = compute_lane.visible(0, b.begin, b.end);
        for (size_t i = first; i < last; ++i)
            split |= store.name(compute_lane.spans()[compute_lane.row(0)[i]].name) == "W";
        for (size_t i = first; i < last; ++i) {
            const Span& s = compute_lane.spans()[compute_lane.row(0)[i]];
            if (s.kind != SpanKind::phase || s.micro_batch < 0) continue;
            const std::string& n = store.name(s.name);
            if (n == "F")
                marks.emplace_back(s.end, +1);
            else if ((n == "B" && !split) || n == "W")
                marks.emplace_back(s.end, -1);
        }
    }
    std::sort(marks.begin(), marks.end());
    int held = 0, most = 0;
    for (auto& [t, d] : marks) most = std::max(most, held += d);
    return most;
}

}  // namespace

std::vector<StepBreakdown> analyze_steps(const TraceStore& store, int rank) {
    const RankTrace* rt = store.rank(rank);
    if (!rt) return {};
    std::vector<StepBreakdown> out = step_windows(*rt, rank);
    const std::array<int, kGroupCount> sizes = group_sizes(store, *rt);
    for (StepBreakdown& b : out) {
        measure_step(step_sets(store, *rt, sizes, b), b);
        b.device_truth = rt->has_device_spans();
        b.micro_batches_in_flight = micro_batches_in_flight(store, *rt, b);
    }
    add_core_waits(store, *rt, out);
    return out;
}

void apply_pipeline_windows(std::vector<std::vector<StepBreakdown>>& steps, const std::vector<int>& replica_of,
                            int chunks, const std::map<int, std::vector<Interval>>& pipeline_waits) {
    std::map<std::pair<int, int>, std::pair<int64_t, int64_t>> window;  // (replica, step) -> [first, last)
    for (size_t r = 0; r < steps.size(); ++r)
        for (const auto& b : steps[r]) {
            if (b.last_op <= b.first_op) continue;
            auto [it, fresh] =
                window.emplace(std::make_pair(replica_of[r], b.step), std::make_pair(b.first_op, b.last_op));
            if (!fresh) {
                it->second.first = std::min(it->second.first, b.first_op);
                it->second.second = std::max(it->second.second, b.last_op);
            }
        }
    for (size_t r = 0; r < steps.size(); ++r)
        for (auto& b : steps[r]) {
            if (chunks > 1) b.micro_batches_in_flight = (b.micro_batches_in_flight + chunks - 1) / chunks;
            auto it = window.find({replica_of[r], b.step});
            if (it == window.end() || b.compute_s <= 0) continue;
            const auto waits = pipeline_waits.find(b.rank);
            // Time in [lo, hi) waiting inside the embedding all-reduce with no op running: the pipeline's idle time
            // (the last stage waiting for the first one's cooldown), not communication.
            auto waiting_in = [&](int64_t lo, int64_t hi) -> int64_t {
                if (waits == pipeline_waits.end()) return 0;
                return intersection_length(union_of(b.busy_set, lo, hi),
                                           subtract(clip(waits->second, lo, hi), b.compute_set));
            };
            // Idle time in [lo, hi): neither an op nor a collective, or that waiting.
            auto idle_in = [&](int64_t lo, int64_t hi) {
                return hi - lo - total_length(union_of(b.busy_set, lo, hi)) + waiting_in(lo, hi);
            };
            const auto [lo, hi] = it->second;
            b.bubble_s = double(idle_in(lo, hi)) / 1e9;
            b.bubble_waiting_s = double(waiting_in(lo, hi)) / 1e9;
            b.bubble_fraction = b.bubble_s / b.compute_s;
            if (waits != pipeline_waits.end() && b.last_op > b.first_op)
                b.stage_bubble_fraction = double(idle_in(b.first_op, b.last_op)) / 1e9 / b.compute_s;
        }
}

StepBreakdown sum_steps(const std::vector<StepBreakdown>& steps) {
    StepBreakdown t;
    if (steps.empty()) return t;
    t.rank = steps.front().rank;
    t.step = -1;
    t.device_truth = steps.front().device_truth;
    t.core_wait_s = runqueue_wait_s(steps);
    t.worker_core_wait_s = sum_over_steps_s(steps, &StepBreakdown::worker_core_wait_s);
    t.core_cpu_s = sum_over_steps_s(steps, &StepBreakdown::core_cpu_s);
    t.worker_cpu_s = sum_over_steps_s(steps, &StepBreakdown::worker_cpu_s);
    t.begin = steps.front().begin;
    t.end = steps.back().end;
    for (const auto& s : steps) {
        t.wall_s += s.wall_s;
        t.compute_s += s.compute_s;
        t.comm_s += s.comm_s;
        t.p2p_s += s.p2p_s;
        t.overlapped_s += s.overlapped_s;
        t.exposed_s += s.exposed_s;
        t.idle_s += s.idle_s;
        t.bubble_s += s.bubble_s, t.bubble_waiting_s += s.bubble_waiting_s;
        t.flops += s.flops;
        t.attention_s += s.attention_s;
        t.attention_flops += s.attention_flops;
        t.experts_s += s.experts_s;
        t.micro_batches_in_flight = std::max(t.micro_batches_in_flight, s.micro_batches_in_flight);
        t.stage_bubble_fraction += s.stage_bubble_fraction * s.compute_s;  // weighted; divided below
        for (size_t g = 0; g < size_t(kGroupCount); ++g) {
            t.group_comm_s[g] += s.group_comm_s[g];
            t.group_exposed_s[g] += s.group_exposed_s[g];
            t.group_bytes[g] += s.group_bytes[g];
        }
    }
    t.stage_bubble_fraction = t.compute_s > 0 ? t.stage_bubble_fraction / t.compute_s : 0.0;
    t.overlap_pct = t.comm_s > 0 ? 100.0 * t.overlapped_s / t.comm_s : 0.0;
    t.bubble_fraction = t.compute_s > 0 ? t.bubble_s / t.compute_s : 0.0;
    return t;
}

std::vector<StepBreakdown> steady_steps(const std::vector<StepBreakdown>& steps) {
    if (steps.empty()) return steps;
    return {steps.begin() + ptrdiff_t(first_steady_index(steps.front().step, steps.size())), steps.end()};
}

}  // namespace us::prof
