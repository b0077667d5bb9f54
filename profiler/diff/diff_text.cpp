// The diff in words (run_diff.h): the verdict first, then the causes that add up to the difference, what is left
// unexplained, the what-if steps (derived), memory, and what could not be matched. Every figure says where it comes
// from.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "common/core/format.h"
#include "profiler/diff/run_diff.h"

namespace us::prof {

std::string cause_title(const Cause& c) {
    switch (c.kind) {
        case CauseKind::compute:
            return fmt::format("compute ({})", c.what);
        case CauseKind::exposed_comm:
            return fmt::format("exposed {} communication", c.what);
        case CauseKind::straggler:
            return c.rank ? fmt::format("waiting for straggler rank {}{}", *c.rank,
                                        c.group.empty() ? "" : " in " + c.group)
                          : std::string("waiting for a straggler");
        case CauseKind::bubble:
            return "pipeline bubble";
        case CauseKind::host:
            return "host overhead (device idle)";
        case CauseKind::idle:
            return "idle";
        case CauseKind::new_ops:
            return "ops new in B / gone from A";
    }
    return "";
}

namespace {

// A name cut to its column, marked where it was cut ("...") so that two names alike up to there are not read as one.
std::string fitted(const std::string& name, size_t width) {
    return name.size() <= width ? name : name.substr(0, width - 3) + "...";
}

std::string bytes_text(const std::optional<int64_t>& b) {
    return b ? fmt::format("{:.1f} MiB", double(*b) / (1 << 20)) : std::string("unknown");
}

std::string settings_line(const RunDiff& d) {
    if (!d.settings) return "settings changed: unknown (a run without the engine's settings: an imported trace)\n";
    if (d.settings->empty())
        return "settings changed: none (the data file aside): what moved is the machine or the code\n";
    return "settings changed: " + describe_changes(*d.settings) + "\n";
}

std::string noise_line(const RunDiff& d) {
    const std::string within = d.within_noise ? "; the difference is within it" : "";
    if (!d.noise_between_ms)
        return fmt::format(
            "noise: {:.2f} ms, the runs' own step spread (derived: the larger range of their steady steps, within "
            "each run, less the slowest and fastest step from 5 steps; how far two runs of the same settings differ "
            "is not in it: give one with --repeat){}\n",
            d.noise_ms, within);
    std::string runs;
    for (const char of : {'A', 'B'}) {
        std::string steps = fmt::format("{} {:.2f}", of, of == 'A' ? d.a_step_ms : d.b_step_ms);
        size_t n = 0;
        for (const RepeatRun& r : d.repeats)
            if (r.of == of) steps += fmt::format(", {} {:.2f}", r.name, r.step_ms), ++n;
        if (n > 0)
            runs += fmt::format("{}{} and its {} repeat(s): {} ms per step", runs.empty() ? "" : "; ", of, n, steps);
    }
    return fmt::format("noise: {:.2f} ms, {} (derived: {}; the larger range {:.2f} ms; within each run {:.2f} ms){}\n",
                       d.noise_ms, noise_words(d), runs, *d.noise_between_ms, d.noise_within_ms, within);
}

std::string cause_lines(const RunDiff& d) {
    std::string s = fmt::format(
        "\nCauses (B minus A, ms per step; they sum to {:+.2f} ms, with {:+.2f} ms "
        "unexplained = {:+.2f} ms measured)\n",
        d.delta_ms - d.unexplained_ms, d.unexplained_ms, d.delta_ms);
    for (const Cause& c : d.causes) {
        if (std::abs(c.ms) < 0.005) continue;
        s += fmt::format("  {:+9.2f}  {:<44} {}{}\n", c.ms, cause_title(c), c.source,
                         c.rank ? fmt::format(", rank {}", *c.rank) : "");
        s += fmt::format("             {}\n", c.evidence);
        for (const CauseOp& o : c.ops)
            s += fmt::format("               {:<48} {:8.3f} -> {:8.3f} ms  ({})\n", fitted(o.name, 48), o.a_ms, o.b_ms,
                             o.match);
    }
    s += fmt::format("  {:+9.2f}  {:<44} derived (the step's change less the causes)\n", d.unexplained_ms,
                     "unexplained");
    return s;
}

}  // namespace

// Communication a step and how much of it compute hid, with the collectives that carried it (a bucket size changes
// their count and size, an overlap setting the hidden part); nothing where neither run communicated.
std::string communication_words(const RunDiff& d) {
    if (d.a_comm.ms == 0 && d.b_comm.ms == 0) return "";
    auto said = [](const RunDiff::Communication& c) {
        const double hidden = c.ms > 0 ? 100 * c.hidden_ms / c.ms : 0;
        std::string s =
            fmt::format("{:.2f} ms, {:.2f} of it hidden behind compute ({:.0f}%)", c.ms, c.hidden_ms, hidden);
        if (c.collectives > 0)
            s += fmt::format(
                ", {:.1f} collectives{}", c.collectives,
                c.bytes > 0
                    ? fmt::format(
                          " of {} on average{}", format_bytes(int64_t(c.bytes / c.sized_collectives)),
                          c.sized_collectives + 1e-9 < c.collectives ? " (of those whose size the trace says)" : "")
                    : std::string());
        return s;
    };
    return fmt::format("communication a step (measured, the ranks' mean): A {}; B {}", said(d.a_comm), said(d.b_comm));
}

std::string format_diff(const RunDiff& d) {
    std::string s = d.verdict + "\n\n";
    s += fmt::format("A: {}  ({} ranks, {} steady steps)  {:.2f} ms per step (measured: the ranks' mean)\n", d.a_name,
                     d.a_ranks, d.a_steps, d.a_step_ms);
    s += fmt::format("B: {}  ({} ranks, {} steady steps)  {:.2f} ms per step (measured: the ranks' mean)\n", d.b_name,
                     d.b_ranks, d.b_steps, d.b_step_ms);
    s += settings_line(d);
    s += noise_line(d);
    if (const std::string comm = communication_words(d); !comm.empty()) s += comm + "\n";
    if (d.a_core_wait || d.b_core_wait) {
        auto said = [](const std::optional<RunDiff::CoreWait>& w) {
            if (!w) return std::string("unknown");
            return fmt::format(
                "{:.2f} ms (rank {} the most, {:.2f} ms{})", w->mean_ms, w->most_rank, w->most_ms,
                w->workers_mean_ms >= 0 ? fmt::format("; OpenMP workers {:.2f} ms, summed", w->workers_mean_ms) : "");
        };
        s += fmt::format(
            "waited for a core a step (measured: the kernel's run queue; the machine's other load, inside compute and "
            "waits): A {}, B {}\n",
            said(d.a_core_wait), said(d.b_core_wait));
    }
    for (const auto& [run, words] : {std::pair{"A", &d.a_oversubscribed}, std::pair{"B", &d.b_oversubscribed}})
        if (!words->empty())
            s += fmt::format("cores: in {} {}: its ranks take turns on them (their waits for a core are its own)\n",
                             run, *words);
    s += cause_lines(d);
    s += "\nWhat if (derived: first-order estimates from B's measured figures, not the engine's walk)\n";
    for (const WhatIf& w : d.what_if)
        s += fmt::format("  {:<24} {:9.2f} ms per step  ({})\n", w.name, w.step_ms, w.basis);
    if (!d.memory.empty()) {
        s += "\nMemory: peak per category, the largest over the ranks (measured)\n";
        for (const MemoryRow& m : d.memory)
            s += fmt::format("  {:<22} {:>12} -> {:>12}\n", m.category, bytes_text(m.a_bytes), bytes_text(m.b_bytes));
    }
    if (!d.ranks.empty()) {
        s +=
            fmt::format("\nRanks (matched by {}), most changed first: B minus A, ms per step (measured)\n", d.ranks_by);
        for (const RankDelta& r : d.ranks)
            s += fmt::format("  {:<28} step {:8.2f} -> {:8.2f}  compute {:+8.2f}  exposed {:+8.2f}  idle {:+8.2f}\n",
                             r.label, r.a_step_ms, r.b_step_ms, r.compute_ms, r.exposed_ms, r.idle_ms);
    }
    if (!d.a_only.empty() || !d.b_only.empty() || !d.notes.empty()) {
        s += "\nNot matched\n";
        if (!d.a_only.empty()) s += fmt::format("  ranks only in A: {}\n", fmt::join(d.a_only, ", "));
        if (!d.b_only.empty()) s += fmt::format("  ranks only in B: {}\n", fmt::join(d.b_only, ", "));
        for (const std::string& n : d.notes) s += "  " + n + "\n";
    }
    return s;
}

}  // namespace us::prof
