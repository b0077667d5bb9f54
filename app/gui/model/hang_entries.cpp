// A rank's entries as rows of text (hang_entries.h).
#include "app/gui/model/hang_entries.h"

#include <fmt/format.h>

#include <algorithm>

namespace us::gui {

namespace {

std::string sizes_text(const std::vector<std::vector<int64_t>>& sizes) {
    std::string out;
    for (const auto& s : sizes) {
        out += out.empty() ? "[" : ", [";
        for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
        out += "]";
    }
    return out.empty() ? "-" : out;
}

std::string dtypes_text(const flight::FlightDump& d, const std::vector<flight::StringId>& ids) {
    std::string out;
    for (flight::StringId id : ids) out += (out.empty() ? "" : ", ") + d.text(id);
    return out.empty() ? "-" : out;
}

std::string took_text(const flight::FlightEntry& e) {
    std::string out;
    if (e.time_completed_ns >= 0 && e.time_created_ns > 0)
        out = fmt::format("{:.3f} ms", double(e.time_completed_ns - e.time_created_ns) / 1e6);
    if (e.duration_ms >= 0) out += fmt::format("{}device {:.3f} ms", out.empty() ? "" : "; ", e.duration_ms);
    return out.empty() ? "-" : out;
}

HangEntryRow row_of(const flight::FlightDump& d, const flight::FlightEntry& e, int64_t t0) {
    HangEntryRow r;
    r.record_id = e.record_id;
    const std::string& desc = d.group_desc(e.group);
    r.group = desc.empty() ? d.group_name(e.group) : fmt::format("{} ({})", d.group_name(e.group), desc);
    r.seq = e.is_p2p ? fmt::format("p2p #{}", e.p2p_seq_id) : fmt::format("#{}", e.collective_seq_id);
    r.op = d.op_name(e);
    const flight::TensorShapes& s = d.shapes[e.shapes];
    r.sizes = sizes_text(s.input_sizes) + " -> " + sizes_text(s.output_sizes);
    r.dtypes = dtypes_text(d, s.input_dtypes) + " -> " + dtypes_text(d, s.output_dtypes);
    r.state = flight::entry_state_name(e.state);
    if (e.retired) r.state += ", retired";
    r.created = e.time_created_ns > 0 ? fmt::format("+{:.3f} s", double(e.time_created_ns - t0) / 1e9) : "-";
    r.took = took_text(e);
    return r;
}

}  // namespace

std::vector<HangEntryRow> hang_rank_entries(const hang::HangAnalysis& a, const hang::DumpSet& set, int rank,
                                            int group) {
    const auto it = std::find_if(set.dumps.begin(), set.dumps.end(), [&](const auto& d) { return d.rank == rank; });
    if (it == set.dumps.end()) return {};
    const flight::FlightDump& d = *it;
    const hang::GroupState* g = group >= 0 && size_t(group) < a.groups.size() ? &a.groups[size_t(group)] : nullptr;
    int64_t t0 = INT64_MAX;
    for (const flight::FlightEntry& e : d.entries)
        if (e.time_created_ns > 0) t0 = std::min(t0, e.time_created_ns);
    std::vector<HangEntryRow> rows;
    rows.reserve(d.entries.size());
    for (size_t i = d.entries.size(); i-- > 0;) {
        const flight::FlightEntry& e = d.entries[i];
        HangEntryRow r = row_of(d, e, t0);
        r.in_group = g && d.group_name(e.group) == g->name && d.group_desc(e.group) == g->desc;
        r.divergence = r.in_group && !e.is_p2p && !g->collective.p2p && e.collective_seq_id == g->collective.seq_id;
        rows.push_back(std::move(r));
    }
    return rows;
}

}  // namespace us::gui
