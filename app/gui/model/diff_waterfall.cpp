// The Compare view's waterfall (diff_waterfall.h).
#include "app/gui/model/diff_waterfall.h"

#include <fmt/format.h>

#include "common/core/check.h"

namespace us::gui {

namespace {

// An imported run's summary holds {} for its settings: unknown (prof::settings_known), as the diff takes it.
prof::DiffSide side_of(const RunSummary& r) { return {r.label, r.cross.get(), r.memory_peaks, r.config}; }

// Another kept run of `a`'s settings (the data file aside): one of the diff's repeats.
bool repeats_settings_of(const RunSummary& a, const RunSummary& r) {
    if (!r.cross || !prof::settings_known(a.config) || !prof::settings_known(r.config)) return false;
    try {
        return prof::setting_changes(a.config, r.config, a.label, r.label).empty();
    } catch (const UserError&) {
        return false;
    }
}

}  // namespace

std::optional<prof::RunDiff> diff_summaries(const std::vector<RunSummary>& kept, size_t a, size_t b, std::string& why) {
    if (!kept[a].cross || !kept[b].cross) {
        why = "a run kept without its cross-rank facts";
        return std::nullopt;
    }
    std::vector<prof::DiffSide> repeats;
    for (size_t i = 0; i < kept.size(); ++i)
        if (i != a && i != b && (repeats_settings_of(kept[a], kept[i]) || repeats_settings_of(kept[b], kept[i])))
            repeats.push_back(side_of(kept[i]));
    try {
        return prof::diff_runs(side_of(kept[a]), side_of(kept[b]), repeats);
    } catch (const UserError& e) {
        why = e.what();
        return std::nullopt;
    }
}

std::vector<WaterfallBar> waterfall_bars(const prof::RunDiff& d, size_t most) {
    std::vector<WaterfallBar> bars;
    bars.push_back({"A's step", 0, d.a_step_ms, "measured", -1});
    double at = d.a_step_ms, rest = 0;
    for (size_t i = 0; i < d.causes.size(); ++i) {
        const prof::Cause& c = d.causes[i];
        if (i >= most) {
            rest += c.ms;
            continue;
        }
        std::string label = prof::kCauseKindNames[int(c.kind)];
        if (!c.what.empty()) label += " (" + c.what + ")";
        if (c.rank) label += fmt::format(", rank {}", *c.rank);
        bars.push_back({label, at, at + c.ms, c.source, int(i)});
        at += c.ms;
    }
    if (rest != 0) {
        bars.push_back({fmt::format("{} smaller causes", d.causes.size() - most), at, at + rest, "measured", -1});
        at += rest;
    }
    bars.push_back({"unexplained", at, at + d.unexplained_ms, "derived", -1});
    bars.push_back({"B's step", 0, d.b_step_ms, "measured", -1});
    return bars;
}

}  // namespace us::gui
