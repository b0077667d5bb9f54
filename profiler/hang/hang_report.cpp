// The hang analysis as JSON and text (hang_report.h).
#include "profiler/hang/hang_report.h"

#include <fmt/format.h>

#include <set>

#include "profiler/hang/collective_call.h"
#include "profiler/hang/hang_verdict_text.h"

namespace us::hang {
namespace {

using nlohmann::json;

json stack_json(const std::vector<StackFrame>& stack) {
    json frames = json::array();
    for (const StackFrame& f : stack) frames.push_back({{"name", f.name}, {"file", f.file}, {"line", f.line}});
    return frames;
}

json group_json(const HangAnalysis& a, const GroupState& g) {
    json held = nullptr;
    if (g.held_by >= 0) held = {{"name", a.groups[size_t(g.held_by)].name}, {"desc", a.groups[size_t(g.held_by)].desc}};
    return {{"name", g.name},
            {"desc", g.desc},
            {"ranks", g.ranks},
            {"ranks_from", g.ranks_from_config ? "pg_config" : "entries"},
            {"kind", hang_kind_name(g.kind)},
            {"culprit_ranks", g.culprit_ranks},
            {"absent_ranks", g.absent_ranks},
            {"root", g.root},
            {"held_by", held},
            {"collective", collective_json(g.collective)},
            {"reference", g.kind == HangKind::mismatch ? collective_json(g.reference) : json(nullptr)},
            {"detail", g.detail},
            {"window", {{"first", g.window_first}, {"last", g.window_last}}}};
}

}  // namespace

json collective_json(const CollectiveCall& c) {
    if (c.seq_id < 0) return nullptr;
    return {{"seq_id", c.seq_id},
            {"p2p", c.p2p},
            {"op", c.op.empty() ? json(nullptr) : json(c.op)},
            {"sizes", c.input_sizes},
            {"dtypes", c.input_dtypes},
            {"output_sizes", c.output_sizes},
            {"output_dtypes", c.output_dtypes},
            {"state", c.state.empty() ? json(nullptr) : json(c.state)},
            {"rank", c.rank < 0 ? json(nullptr) : json(c.rank)}};
}

json hang_json(const HangAnalysis& a) {
    json culprits = json::array();
    for (const Culprit& c : a.culprits)
        culprits.push_back(
            {{"rank", c.rank},
             {"host", c.host.empty() ? json(nullptr) : json(c.host)},
             {"absent", c.absent},
             {"last_completed", collective_json(c.last_completed)},
             {"last_completed_group", c.last_completed_group.empty() ? json(nullptr) : json(c.last_completed_group)},
             {"stack", stack_json(c.stack)},
             {"stack_of", c.stack_of.empty() ? json(nullptr) : json(c.stack_of)}});
    json groups = json::array();
    for (const GroupState& g : a.groups) groups.push_back(group_json(a, g));
    json ranks = json::array();
    for (const auto& r : a.ranks)
        ranks.push_back({{"rank", r.rank},
                         {"host", r.host.empty() ? json(nullptr) : json(r.host)},
                         {"file", r.source},
                         {"entries", r.entries}});
    json pg = nullptr;
    if (a.group >= 0) {
        const GroupState& g = a.groups[size_t(a.group)];
        pg = {{"name", g.name}, {"desc", g.desc}, {"ranks", g.ranks}};
    }
    return {{"kind", hang_kind_name(a.kind)},
            {"verdict", a.verdict},
            {"evidence", a.evidence},
            {"culprit_ranks", a.culprit_ranks},
            {"node", a.node.empty() ? json(nullptr) : json(a.node)},
            {"process_group", pg},
            {"collective", collective_json(a.collective)},
            {"culprit_call", collective_json(a.culprit_call)},
            {"stack", stack_json(a.stack)},
            {"reference_stack", stack_json(a.reference_stack)},
            {"culprits", culprits},
            {"groups", groups},
            {"absent_ranks", a.absent_ranks},
            {"culprit_active_after_s", a.culprit_active_after_s >= 0 ? json(a.culprit_active_after_s) : json(nullptr)},
            {"longest_open_s", a.longest_open_s >= 0 ? json(a.longest_open_s) : json(nullptr)},
            {"world", a.world},
            {"injected", a.injected},
            {"unrecorded", {{"ranks", a.unrecorded_gap_ranks}, {"operations", a.unrecorded_ops}}},
            {"problems", a.left_out},
            {"ranks", ranks}};
}

std::string format_hang(const HangAnalysis& a) {
    std::string out = fmt::format("What holds the job (Flight Recorder dumps of {} rank{}; measured):\n  {}\n",
                                  a.ranks.size(), a.ranks.size() == 1 ? "" : "s", a.verdict);
    for (const std::string& e : a.evidence) out += "    - " + e + "\n";
    if (!a.stack.empty()) {
        out +=
            fmt::format("  Stack of rank {} (innermost first):\n", a.culprit_ranks.empty() ? -1 : a.culprit_ranks[0]);
        for (size_t i = 0; i < a.stack.size() && i < 12; ++i)
            out += fmt::format("    {}:{} in {}\n", a.stack[i].file, a.stack[i].line, a.stack[i].name);
        if (a.stack.size() > 12)
            out += fmt::format("    ... {} more frames (--json has them all)\n", a.stack.size() - 12);
    }
    size_t hung = 0;
    for (const GroupState& g : a.groups) hung += g.kind != HangKind::none;
    out += fmt::format("Process groups: {} ({} hung, {} agree and completed)\n", a.groups.size(), hung,
                       a.groups.size() - hung);
    size_t shown = 0;
    for (size_t i = 0; i < a.groups.size() && shown < 24; ++i) {
        const GroupState& g = a.groups[i];
        if (g.kind == HangKind::none) continue;
        ++shown;
        std::string role = g.root ? "root" : "victim of " + group_label(a.groups[size_t(g.held_by)]);
        out += fmt::format("  {} [{} member{}]: {} ({}) - {}\n", group_label(g), g.ranks.size(),
                           g.ranks.size() == 1 ? "" : "s", hang_kind_name(g.kind), role, g.detail);
    }
    if (shown < hung) out += fmt::format("  ... {} more hung groups (--json lists every group)\n", hung - shown);
    std::set<std::string> hosts;
    for (const auto& r : a.ranks)
        if (!r.host.empty()) hosts.insert(r.host);
    out += fmt::format(
        "Dumps: {} of {} ranks{}", a.ranks.size(), a.world,
        hosts.empty() ? std::string() : fmt::format(", from {} host{}", hosts.size(), hosts.size() == 1 ? "" : "s"));
    out += a.absent_ranks.empty() ? "\n" : fmt::format("; none from {}\n", rank_list(a.absent_ranks));
    for (const std::string& p : a.left_out) out += "  ! " + p + "\n";
    return out;
}

}  // namespace us::hang
