// A rank reduced to its digest (rank_digest.h), and the digest's compact form.
#include "profiler/analysis/rank_digest.h"

#include "profiler/analysis/core_wait.h"

#include <zstd.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/core/check.h"
#include "profiler/transport/grid_coords.h"
#include "profiler/analysis/imported_run.h"
#include "profiler/analysis/op_table.h"
#include "profiler/analysis/steady_step.h"
#include "profiler/trace/chrome_export.h"
#include "profiler/trace/run_info.h"

namespace us::prof {

namespace {

constexpr size_t kDigestOps = 64;  // the op table's leading rows kept (an engine run's whole table)

bool to_peer(const Span& s, Lane lane) {
    return lane == Lane::p2p || ((s.op == OpClass::send || s.op == OpClass::recv) && s.peer >= 0);
}

// The digest's groups: an engine group is its kind and instance (the ranks sharing every other grid coordinate),
// an imported one its process group (name and ranks, as the trace's pg_config says), else one unnamed group.
class GroupTable {
public:
    GroupTable(const RankTrace& rt, RankDigest& d) : m_rt(rt), m_d(d), m_groups(imported_run_info(rt).process_groups) {}
    int32_t slot(int group) {
        auto it = m_slots.find(group);
        if (it != m_slots.end()) return it->second;
        DigestGroup g;
        g.name = process_group_name(m_rt, group);
        g.id = group;
        if (!m_rt.imported()) {
            g.key = std::string(group < kGroupCount ? group_kind_name(GroupKind(group)) : "group") + "|" +
                    (group < kGroupCount ? engine_group_instance(m_rt.info.coords, group) : std::to_string(group));
        } else if (auto pg = std::find_if(m_groups.begin(), m_groups.end(),
                                          [&](const ProcessGroupInfo& p) { return p.group == group; });
                   pg != m_groups.end()) {
            g.ranks = pg->ranks;
            g.key = "pg " + pg->name + " " + nlohmann::json(pg->ranks).dump();
        } else {
            g.key = "unnamed";
        }
        m_d.groups.push_back(std::move(g));
        return m_slots[group] = int32_t(m_d.groups.size() - 1);
    }

private:
    const RankTrace& m_rt;
    RankDigest& m_d;
    std::vector<ProcessGroupInfo> m_groups;
    std::map<int, int32_t> m_slots;
};

nlohmann::json figures_json(const HtaFigures& f) {
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    return {f.kernel_time_us,
            f.idle_time_us,
            f.compute_time_us,
            f.non_compute_time_us,
            opt(f.comp_comm_overlap_pct),
            opt(f.host_wait_us),
            opt(f.kernel_wait_us),
            opt(f.other_us),
            f.kernels};
}

HtaFigures figures_from_json(const nlohmann::json& j) {
    auto opt = [](const nlohmann::json& v) { return v.is_null() ? std::optional<double>() : v.get<double>(); };
    HtaFigures f;
    f.kernel_time_us = j.at(0), f.idle_time_us = j.at(1), f.compute_time_us = j.at(2);
    f.non_compute_time_us = j.at(3), f.comp_comm_overlap_pct = opt(j.at(4)), f.host_wait_us = opt(j.at(5));
    f.kernel_wait_us = opt(j.at(6)), f.other_us = opt(j.at(7)), f.kernels = j.at(8);
    return f;
}

// A CPU rank's asynchronous gloo collective shows twice: the c10d op that issues it (returning at once) and gloo's
// span of the work, which outlives it. One operation: from the issue to the work's end.
void merge_async_gloo(std::vector<DigestCollective>& collectives, const std::set<std::pair<int64_t, int64_t>>& work) {
    if (work.empty()) return;
    std::vector<DigestCollective> merged;
    for (const DigestCollective& c : collectives) {
        const bool is_work = work.count({c.begin, c.end}) > 0;
        auto issue =
            std::find_if(merged.rbegin(), merged.rend(), [&](const DigestCollective& m) { return m.group == c.group; });
        if (is_work && issue != merged.rend() && !work.count({issue->begin, issue->end}) && issue->end <= c.end &&
            issue->op == c.op) {
            issue->end = c.end;
            issue->bytes = std::max(issue->bytes, c.bytes);
            continue;
        }
        merged.push_back(c);
    }
    collectives = std::move(merged);
}

// The rank's collectives (each in its group instance, the k-th of its group counted in time) and its pipeline
// transfers (the k-th of each peer and direction). On a GPU with NCCL kernels the device's record is the truth;
// elsewhere the collective spans (the engine's, or gloo's) and the pipeline's transfers.
void add_communication(const TraceStore& store, const RankTrace& rt, RankDigest& d) {
    GroupTable groups(rt, d);
    std::set<std::pair<int64_t, int64_t>> gloo_work;  // gloo's asynchronous work spans
    auto add = [&](const Span& s, Lane lane) {
        if (s.kind != SpanKind::comm) return;
        if (to_peer(s, lane)) {
            DigestTransfer t;
            t.peer = s.peer, t.send = s.op == OpClass::send;
            t.step = s.step, t.phase = Phase(s.phase), t.bytes = int64_t(s.bytes), t.begin = s.begin, t.end = s.end;
            d.transfers.push_back(t);
            return;
        }
        DigestCollective c;
        c.group = groups.slot(s.group);
        c.op = s.op, c.step = s.step, c.phase = Phase(s.phase), c.bytes = int64_t(s.bytes);
        c.begin = s.begin, c.end = s.end;
        if (store.name(s.name).rfind("gloo:", 0) == 0) gloo_work.insert({c.begin, c.end});
        d.collectives.push_back(c);
    };
    const bool device_comm = !rt.lanes[size_t(Lane::device_comm)].spans().empty();
    for (const Lane lane :
         device_comm ? std::vector<Lane>{Lane::device_comm, Lane::p2p} : std::vector<Lane>{Lane::comm, Lane::p2p})
        for (const Span& s : rt.lanes[size_t(lane)].spans()) add(s, lane);
    auto by_begin = [](const auto& a, const auto& b) { return a.begin < b.begin; };
    // A trace's events need not come in time order; the k-th is counted in time.
    std::stable_sort(d.collectives.begin(), d.collectives.end(), by_begin);
    std::stable_sort(d.transfers.begin(), d.transfers.end(), by_begin);
    merge_async_gloo(d.collectives, gloo_work);
    std::map<int32_t, int32_t> next_index;                  // per group slot
    std::map<std::pair<int32_t, bool>, int32_t> next_peer;  // per (peer, send)
    for (DigestCollective& c : d.collectives) c.index = next_index[c.group]++;
    for (DigestTransfer& t : d.transfers) t.index = next_peer[{t.peer, t.send}]++;
}

}  // namespace

std::vector<DigestStep> RankDigest::steady() const {
    if (steps.empty()) return steps;
    return {steps.begin() + ptrdiff_t(first_steady_index(steps.front().step, steps.size())), steps.end()};
}

CoreTimes RankDigest::steady_core_times() const {
    const std::vector<DigestStep> kept = steady();
    auto per_step = [&](double DigestStep::*field) {
        const double total = sum_over_steps_s(kept, field);
        return total < 0 ? -1 : total / double(kept.size());
    };
    return {per_step(&DigestStep::core_wait_s), per_step(&DigestStep::core_cpu_s),
            per_step(&DigestStep::worker_core_wait_s), per_step(&DigestStep::worker_cpu_s)};
}

RankDigest make_digest(const TraceStore& store, int rank) {
    return make_digest(store, rank, analyze_steps(store, rank));
}

RankDigest make_digest(const TraceStore& store, int rank, const std::vector<StepBreakdown>& steps) {
    return make_digest(store, rank, steps, op_table(store, rank, steady_steps(steps)), hta_breakdown(store, rank));
}

RankDigest make_digest(const TraceStore& store, int rank, const std::vector<StepBreakdown>& steps, const OpTable& table,
                       const std::optional<HtaBreakdown>& hta) {
    RankDigest d = digest_without_steps(store, rank);
    add_step_figures(d, steps, table, hta);
    return d;
}

RankDigest digest_without_steps(const TraceStore& store, int rank) {
    const RankTrace* rt = store.rank(rank);
    US_ASSERT(rt, "no rank {} to digest", rank);
    RankDigest d;
    d.rank = rank;
    d.label = rank_label(*rt);
    d.host = store.is_prediction() ? "" : rt->info.host;  // a planner's ranks are on no machine
    d.machine = rt->info.machine.value_or(""), d.cpus = rt->info.cpus.value_or("");
    if (rt->info.backend == "cpu") d.threads = rt->info.threads.value_or(0);
    d.coords = rt->info.coords, d.grid = rt->info.grid, d.microbatches = rt->info.microbatches;
    d.source = rt->imported() ? "kineto" : store.is_prediction() ? "planner" : "engine";
    d.device = rt->has_device_spans();
    d.world_size = store.world_size();
    if (rt->info.clock)
        d.clock_offset_ns = rt->info.clock->offset_ns, d.clock_uncertainty_ns = rt->info.clock->uncertainty_ns;
    add_communication(store, *rt, d);
    d.work_windows = work_windows(*rt);
    d.annotated_microbatches = annotated_micro_batches(store, *rt);
    return d;
}

void add_step_figures(RankDigest& d, const std::vector<StepBreakdown>& steps, const OpTable& table,
                      const std::optional<HtaBreakdown>& hta) {
    for (const StepBreakdown& b : steps)
        d.steps.push_back({b.step, b.begin, b.end, b.wall_s, b.compute_s, b.comm_s, b.exposed_s, b.idle_s, b.bubble_s,
                           b.p2p_s, b.overlapped_s, b.group_exposed_s, b.core_wait_s, b.worker_core_wait_s,
                           b.core_cpu_s, b.worker_cpu_s, b.bubble_waiting_s});
    for (size_t i = 0; i < table.rows.size(); ++i) {
        const OpRow& r = table.rows[i];
        const ComputeKind kind = compute_kind(r.kind);
        d.kind_self_s[size_t(kind)] += table.per_step(r.self_s);
        if (i < kDigestOps)
            d.ops.push_back({r.name, r.op, double(r.calls) / std::max(1, table.steps), table.per_step(r.self_s), kind});
    }
    d.ops_complete = table.rows.size() <= kDigestOps;
    if (hta) d.hta = hta->total;
}

nlohmann::json digest_json(const RankDigest& d) {
    nlohmann::json groups = nlohmann::json::array(), steps = nlohmann::json::array(), windows = nlohmann::json::array(),
                   collectives = nlohmann::json::array(), transfers = nlohmann::json::array(),
                   ops = nlohmann::json::array();
    for (const DigestGroup& g : d.groups) groups.push_back({g.key, g.name, g.ranks, g.id});
    for (const DigestStep& s : d.steps)
        steps.push_back({s.step, s.begin, s.end, s.wall_s, s.compute_s, s.comm_s, s.exposed_s, s.idle_s, s.bubble_s,
                         s.p2p_s, s.overlapped_s, s.group_exposed_s, s.core_wait_s, s.worker_core_wait_s, s.core_cpu_s,
                         s.worker_cpu_s, s.bubble_waiting_s});
    for (const WorkWindow& w : d.work_windows) windows.push_back({w.step, w.window_ns, w.work_ns});
    for (const DigestCollective& c : d.collectives)
        collectives.push_back({c.group, c.index, int(c.op), c.step, int(c.phase), c.bytes, c.begin, c.end});
    for (const DigestTransfer& t : d.transfers)
        transfers.push_back({t.peer, t.send, t.index, t.step, int(t.phase), t.bytes, t.begin, t.end});
    for (const DigestOp& o : d.ops) ops.push_back({o.name, int(o.op), o.calls, o.self_s, int(o.kind)});
    return {
        {"version", RankDigest::kVersion},
        {"rank", d.rank},
        {"label", d.label},
        {"host", d.host},
        {"machine", d.machine},
        {"cpus", d.cpus},
        {"threads", d.threads},
        {"coords", grid_json(d.coords)},
        {"grid", grid_json(d.grid)},
        {"microbatches", d.microbatches ? nlohmann::json(*d.microbatches) : nlohmann::json()},
        {"annotated_microbatches", d.annotated_microbatches},
        {"source", d.source},
        {"device", d.device},
        {"world_size", d.world_size},
        {"clock_offset_ns", d.clock_offset_ns ? nlohmann::json(*d.clock_offset_ns) : nlohmann::json()},
        {"clock_uncertainty_ns", d.clock_uncertainty_ns ? nlohmann::json(*d.clock_uncertainty_ns) : nlohmann::json()},
        {"file", d.file},
        {"file_bytes", d.file_bytes},
        {"file_mtime_ns", d.file_mtime_ns},
        {"groups", groups},
        {"steps", steps},
        {"work_windows", windows},
        {"collectives", collectives},
        {"transfers", transfers},
        {"ops", ops},
        {"ops_complete", d.ops_complete},
        {"kind_self_s", d.kind_self_s},
        {"hta", d.hta ? figures_json(*d.hta) : nlohmann::json()}};
}

RankDigest digest_from_json(const nlohmann::json& j) {
    try {
        US_CHECK_INPUT(j.value("version", 0) == RankDigest::kVersion, "digest version {} (this build reads {})",
                       j.value("version", 0), RankDigest::kVersion);
        RankDigest d;
        d.rank = j.at("rank"), d.label = j.at("label"), d.host = j.at("host"), d.source = j.at("source");
        d.machine = j.at("machine"), d.cpus = j.at("cpus"), d.threads = j.at("threads");
        d.coords = grid_from_json<GridCoords>(j.at("coords")), d.grid = grid_from_json<GridSizes>(j.at("grid"));
        if (!j.at("microbatches").is_null()) d.microbatches = j.at("microbatches").get<int>();
        d.annotated_microbatches = j.at("annotated_microbatches");
        d.device = j.at("device"), d.world_size = j.at("world_size");
        if (!j.at("clock_offset_ns").is_null()) d.clock_offset_ns = j.at("clock_offset_ns").get<int64_t>();
        if (!j.at("clock_uncertainty_ns").is_null())
            d.clock_uncertainty_ns = j.at("clock_uncertainty_ns").get<int64_t>();
        d.file = j.at("file"), d.file_bytes = j.at("file_bytes"), d.file_mtime_ns = j.at("file_mtime_ns");
        for (const auto& g : j.at("groups")) d.groups.push_back({g.at(0), g.at(1), g.at(2), g.at(3)});
        for (const auto& s : j.at("steps"))
            d.steps.push_back({s.at(0), s.at(1), s.at(2), s.at(3), s.at(4), s.at(5), s.at(6), s.at(7), s.at(8), s.at(9),
                               s.at(10), s.at(11).get<std::array<double, kGroupCount>>(), s.at(12), s.at(13), s.at(14),
                               s.at(15), s.at(16)});
        for (const auto& w : j.at("work_windows")) d.work_windows.push_back({w.at(0), w.at(1), w.at(2)});
        const int32_t groups = int32_t(d.groups.size());
        for (const auto& c : j.at("collectives")) {
            DigestCollective x;
            x.group = c.at(0), x.index = c.at(1), x.op = OpClass(c.at(2).get<int>()), x.step = c.at(3);
            x.phase = Phase(c.at(4).get<int>()), x.bytes = c.at(5), x.begin = c.at(6), x.end = c.at(7);
            US_CHECK_INPUT(x.group >= 0 && x.group < groups && int(x.op) < int(OpClass::count) &&
                               int(x.phase) <= int(Phase::optimizer),
                           "a collective out of range");
            d.collectives.push_back(x);
        }
        for (const auto& t : j.at("transfers")) {
            DigestTransfer x;
            x.peer = t.at(0), x.send = t.at(1), x.index = t.at(2), x.step = t.at(3);
            x.phase = Phase(t.at(4).get<int>()), x.bytes = t.at(5), x.begin = t.at(6), x.end = t.at(7);
            US_CHECK_INPUT(int(x.phase) <= int(Phase::optimizer), "a transfer out of range");
            d.transfers.push_back(x);
        }
        for (const auto& o : j.at("ops")) {
            US_CHECK_INPUT(o.at(1).get<int>() >= 0 && o.at(1).get<int>() < int(OpClass::count) &&
                               o.at(4).get<int>() >= 0 && o.at(4).get<int>() < kComputeKindCount,
                           "an op out of range");
            d.ops.push_back({o.at(0), OpClass(o.at(1).get<int>()), o.at(2), o.at(3), ComputeKind(o.at(4).get<int>())});
        }
        d.ops_complete = j.at("ops_complete");
        d.kind_self_s = j.at("kind_self_s").get<std::array<double, kComputeKindCount>>();
        if (!j.at("hta").is_null()) d.hta = figures_from_json(j.at("hta"));
        return d;
    } catch (const nlohmann::json::exception& e) {
        throw UserError(fmt::format("a malformed digest ({})", e.what()));
    }
}

std::string digest_bytes(const RankDigest& d) {
    const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(digest_json(d));
    std::string out(ZSTD_compressBound(cbor.size()), '\0');
    const size_t n = ZSTD_compress(out.data(), out.size(), cbor.data(), cbor.size(), 3);
    US_ASSERT(!ZSTD_isError(n), "zstd: {}", ZSTD_getErrorName(n));
    out.resize(n);
    return out;
}

RankDigest digest_from_bytes(const std::string& bytes, const std::string& what) {
    const unsigned long long size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
    US_CHECK_INPUT(size != ZSTD_CONTENTSIZE_ERROR && size != ZSTD_CONTENTSIZE_UNKNOWN && size < (1ull << 32),
                   "{}: not a digest (not zstd-compressed, or damaged)", what);
    std::vector<uint8_t> cbor(size);
    const size_t n = ZSTD_decompress(cbor.data(), cbor.size(), bytes.data(), bytes.size());
    US_CHECK_INPUT(!ZSTD_isError(n) && n == size, "{}: a damaged digest ({})", what,
                   ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short");
    const nlohmann::json j = nlohmann::json::from_cbor(cbor, true, false);
    US_CHECK_INPUT(!j.is_discarded() && j.is_object(), "{}: a damaged digest (not CBOR)", what);
    try {
        return digest_from_json(j);
    } catch (const UserError& e) {
        throw UserError(fmt::format("{}: {}", what, e.what()));
    }
}

}  // namespace us::prof
