// The verdict's sentence and evidence (hang_verdict_text.h).
#include "profiler/hang/hang_verdict_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/hang/collective_call.h"

namespace us::hang {
namespace {

std::string who(const HangAnalysis& a) {
    if (!a.node.empty()) return fmt::format("node {} ({})", a.node, rank_list(a.culprit_ranks));
    std::string s = rank_list(a.culprit_ranks);
    if (a.culprits.size() == 1 && !a.culprits[0].host.empty()) s += " (on " + a.culprits[0].host + ")";
    return s;
}

bool from_library(const StackFrame& f) {
    return f.file.find("torch/distributed") != std::string::npos ||
           f.file.find("torch/nn/parallel") != std::string::npos || f.file.find("c10d") != std::string::npos ||
           f.file.find("<built-in") != std::string::npos;
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
    // Runs of three or more consecutive ranks as "a-b", at most 12 pieces: a sentence about 4,096 ranks stays one.
    std::vector<std::string> pieces;
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        if (j - i >= 2) {
            pieces.push_back(fmt::format("{}-{}", ranks[i], ranks[j]));
        } else {
            j = i;
            pieces.push_back(std::to_string(ranks[i]));
        }
        i = j + 1;
    }
    std::string s;
    const size_t shown = std::min<size_t>(pieces.size(), 12);
    for (size_t i = 0; i < shown; ++i) {
        if (i) s += i + 1 == pieces.size() ? " and " : ", ";
        s += pieces[i];
    }
    if (shown < pieces.size()) s += fmt::format(" ... ({} in all)", ranks.size());
    return (ranks.size() == 1 ? "rank " : "ranks ") + s;
}

std::string group_label(const std::string& name, const std::string& desc) {
    if (desc.empty()) return fmt::format("group '{}'", name);
    return fmt::format("group '{}' ({})", name, desc);
}

std::string group_label(const GroupState& g) { return group_label(g.name, g.desc); }

std::string frame_label(const std::vector<StackFrame>& stack) {
    for (const StackFrame& f : stack)
        if (!from_library(f)) return fmt::format("{}:{} in {}", f.file, f.line, f.name);
    if (stack.empty()) return "";
    return fmt::format("{}:{} in {}", stack[0].file, stack[0].line, stack[0].name);
}

void write_verdict(HangAnalysis& a) {
    a.evidence.clear();
    const GroupState* root = a.group >= 0 ? &a.groups[size_t(a.group)] : nullptr;
    const std::string where = a.stack.empty() ? ""
                              : a.culprits.size() > 1
                                  ? fmt::format("; rank {}'s stack: {}", a.culprits.front().rank, frame_label(a.stack))
                                  : "; its stack: " + frame_label(a.stack);
    switch (a.kind) {
        case HangKind::none:
            // Operations the recorder kept no entry for may be where it hangs: the headline says so, not "nothing".
            a.verdict = a.groups.empty() ? "The dumps hold no collectives: nothing to align."
                        : !a.unrecorded_gap_ranks.empty()
                            ? fmt::format(
                                  "No collective is hung: every group's collectives agree and completed; but "
                                  "{} did {} operation{} the recorder kept no entry for ({}), and a hang there "
                                  "cannot show in these dumps.",
                                  rank_list(a.unrecorded_gap_ranks), a.unrecorded_ops, a.unrecorded_ops == 1 ? "" : "s",
                                  a.unrecorded_under_gloo ? "point-to-point sends and receives under gloo"
                                                          : "gaps in their groups' op_id")
                            : "Nothing is hung in what the dumps hold: every group's collectives agree and completed.";
            break;
        case HangKind::missing:
            if (!root) {
                a.verdict = fmt::format(
                    "{} left no dump{} while every rank that did agrees: {} the first suspect "
                    "(a rank that died or hung before it could dump).",
                    rank_list(a.culprit_ranks),
                    a.another_jobs_ranks.empty() ? std::string()
                                                 : fmt::format(" of this job (the file of {} was another job's)",
                                                               rank_list(a.another_jobs_ranks)),
                    a.culprit_ranks.size() == 1 ? "it is" : "they are");
            } else if (std::all_of(a.culprits.begin(), a.culprits.end(), [](const Culprit& c) { return c.absent; })) {
                // a send or receive names the one rank that waits (its detail); a collective, every other member
                const std::string waiting =
                    a.collective.p2p
                        ? fmt::format("in {}: {}", group_label(*root), root->detail)
                        : fmt::format("the other members of {} wait for {} in {}", group_label(*root),
                                      a.culprit_ranks.size() == 1 ? "it" : "them", call_label(a.collective));
                a.verdict = fmt::format(
                    "{} left no dump, and {}: {} (a rank that died or hung before it could dump) {} the job.",
                    rank_list(a.culprit_ranks), waiting, rank_list(a.culprit_ranks),
                    a.culprit_ranks.size() == 1 ? "holds" : "hold");
            } else if (a.collective.p2p) {  // a send or receive whose partner was never posted
                a.verdict = fmt::format("{} never posted its side of {} of {} ({}): {} {} the job{}.", who(a),
                                        call_label(a.collective), group_label(*root), root->detail, who(a),
                                        a.culprit_ranks.size() == 1 ? "holds" : "hold", where);
            } else {
                a.verdict = fmt::format("{} never entered {} of {}, where the other members wait: {} {} the job{}.",
                                        who(a), call_label(a.collective), group_label(*root), who(a),
                                        a.culprit_ranks.size() == 1 ? "holds" : "hold", where);
            }
            break;
        case HangKind::mismatch:
            a.verdict = root->tie ? fmt::format("{} disagree in {} of {}: {}{}.", who(a), call_label(a.collective),
                                                group_label(*root), root->detail, where)
                                  : fmt::format("{} called something else in {} of {}: {}{}.", who(a),
                                                call_label(a.collective), group_label(*root), root->detail, where);
            break;
        case HangKind::p2p_deadlock:
            a.verdict = fmt::format("{} deadlock in point-to-point operations of {}: {}{}.", rank_list(a.culprit_ranks),
                                    group_label(*root), root->cycle, where);
            break;
        case HangKind::inside_collective:
            a.verdict = fmt::format(
                "Every member of {} entered {} and none left it: not a desync (a slow or broken "
                "link, or the communication library){}.",
                group_label(*root), call_label(a.collective),
                root->culprit_ranks.empty() ? ""
                                            : fmt::format("; rank {} entered it {:.1f} s after the first",
                                                          root->culprit_ranks.front(), root->late_entry_s));
            break;
    }
    // Dumps taken on demand from a running job read like a hang, and a dump has no time of its own: where a culprit
    // completed work begun after the others entered, the dumps cannot tell a rank that stopped just after from one
    // caught in motion. Said as a condition on how the dumps were taken, never as a finding.
    if (a.culprit_active_after_s >= 0 && a.kind == HangKind::missing)
        a.verdict += fmt::format(
            " This holds if the dumps were taken well into the wait: {} completed an operation begun {:.0f} ms after "
            "the others entered it (the ranks' clocks), and dumps taken on demand at different moments of a running "
            "job read the same.",
            a.culprit_ranks.size() == 1 ? rank_list(a.culprit_ranks) : "a culprit", 1e3 * a.culprit_active_after_s);
    if (root && a.kind != HangKind::none) a.evidence.push_back(group_label(*root) + ": " + root->detail);
    size_t described = 0;
    for (const Culprit& c : a.culprits) {
        if (++described > 8) {
            a.evidence.push_back(fmt::format("... {} more culprits (--json lists them all)", a.culprits.size() - 8));
            break;
        }
        if (c.absent) {
            a.evidence.push_back(
                fmt::format("rank {}: no dump{} (a suspect for that alone)", c.rank,
                            std::binary_search(a.another_jobs_ranks.begin(), a.another_jobs_ranks.end(), c.rank)
                                ? " of this job: the file named as its dump was left out as another job's"
                                : ""));
            continue;
        }
        a.evidence.push_back(
            fmt::format("rank {}{}: last completed {}{}", c.rank, c.host.empty() ? "" : " on " + c.host,
                        c.last_completed.seq_id < 0 ? "nothing the buffer still holds"
                                                    : fmt::format("{} of {} ({})", call_label(c.last_completed),
                                                                  c.last_completed_group, c.last_completed.op),
                        // the stack is its entry's that matters, which need not be the completed one named before
                        c.stack.empty() ? "" : fmt::format("; in {}: {}", c.stack_of, frame_label(c.stack))));
    }
    size_t victims = 0;
    for (const GroupState& g : a.groups)
        if (g.held_by >= 0) ++victims;
    if (victims > 0)
        a.evidence.push_back(
            fmt::format("{} other group{} wait{} on it: their culprits are stuck inside it (victims, "
                        "not causes)",
                        victims, victims == 1 ? "" : "s", victims == 1 ? "s" : ""));
    // Other roots: those whose culprits the verdict already names wait on the same ranks; the rest hang apart.
    size_t same_ranks = 0, apart = 0;
    for (size_t g = 0; g < a.groups.size(); ++g) {
        if (!a.groups[g].root || int(g) == a.group) continue;
        const auto& c = a.groups[g].culprit_ranks;
        const bool same =
            !c.empty() && std::includes(a.culprit_ranks.begin(), a.culprit_ranks.end(), c.begin(), c.end());
        ++(same ? same_ranks : apart);
    }
    if (same_ranks > 0)
        a.evidence.push_back(fmt::format("{} more group{} wait{} for {} too", same_ranks, same_ranks == 1 ? "" : "s",
                                         same_ranks == 1 ? "s" : "", rank_list(a.culprit_ranks)));
    if (apart > 0)
        a.evidence.push_back(fmt::format("{} more group{} hang{} apart from it: see the groups below", apart,
                                         apart == 1 ? "" : "s", apart == 1 ? "s" : ""));
    // the absent ranks the verdict does not already name (a culprit without a dump has its own line above)
    std::vector<int> other_absent;
    for (const int r : a.absent_ranks)
        if (!std::binary_search(a.culprit_ranks.begin(), a.culprit_ranks.end(), r)) other_absent.push_back(r);
    if (!other_absent.empty() && !(a.kind == HangKind::missing && !root))
        a.evidence.push_back(fmt::format(
            "no dump from {} (of {}){}: {} suspect{} too", rank_list(other_absent), a.world,
            a.another_jobs_ranks.empty()
                ? std::string()
                : fmt::format("; the file of {} was left out as another job's", rank_list(a.another_jobs_ranks)),
            other_absent.size() == 1 ? "a" : "", other_absent.size() == 1 ? "" : "s"));
    if (!a.unrecorded_gap_ranks.empty())
        a.evidence.push_back(
            fmt::format("{} did {} operation{} the recorder kept no entry for (gaps in op_id{}), so a hang in "
                        "them cannot show in these dumps",
                        rank_list(a.unrecorded_gap_ranks), a.unrecorded_ops, a.unrecorded_ops == 1 ? "" : "s",
                        a.unrecorded_under_gloo ? ": gloo records no send or recv" : ""));
    for (const std::string& f : a.injected) a.evidence.push_back("injected fault, " + f);
}

}  // namespace us::hang
