// The memory snapshot view: a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) per rank and device.
// Allocated and reserved bytes over the recorded trace (measured by the caching allocator, replayed; the gap between
// them is the allocator's cache), the peak and any OOM marked on it; what was alive at the peak, by the user's frame
// that allocated it and by category (inferred from the frames, else unknown); fragmentation at the peak; the state
// at dump time from the segments. docs/pytorch-memory.md says how each figure is made.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>

#include "app/gui/app_state.h"
#include "app/gui/theme.h"
#include "app/gui/views.h"
#include "common/core/format.h"
#include "profiler/snapshot/frame_rules.h"

namespace us::gui {

namespace {

constexpr ImU32 kAllocatedColor = IM_COL32(90, 160, 230, 200);
constexpr ImU32 kReservedColor = IM_COL32(230, 200, 90, 255);
constexpr ImU32 kOomColor = IM_COL32(240, 70, 60, 255);

// Allocated (filled) under reserved (a line) over the trace's samples, the peak and OOMs marked; a hover readout.
void draw_timeline(const snap::DeviceMemory& m, float height) {
    const auto& samples = m.timeline;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float w = std::max(50.0f, ImGui::GetContentRegionAvail().x - 4), h = height;
    dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + h), IM_COL32(24, 26, 32, 255));
    int64_t top = 1;
    for (const auto& s : samples) top = std::max({top, s.reserved, s.allocated});
    const size_t n = samples.size();
    auto x_of = [&](size_t i) { return p0.x + w * float(i) / float(std::max<size_t>(1, n)); };
    auto y_of = [&](int64_t v) { return p0.y + h - h * float(double(v) / double(top)); };
    for (size_t i = 0; i < n; ++i) {  // one column per sample: what the slice held at most
        dl->AddRectFilled(ImVec2(x_of(i), y_of(samples[i].allocated)), ImVec2(x_of(i + 1), p0.y + h), kAllocatedColor);
        if (i > 0) dl->AddLine(ImVec2(x_of(i), y_of(samples[i - 1].reserved)), ImVec2(x_of(i), y_of(samples[i].reserved)), kReservedColor);
        dl->AddLine(ImVec2(x_of(i), y_of(samples[i].reserved)), ImVec2(x_of(i + 1), y_of(samples[i].reserved)), kReservedColor, 1.5f);
    }
    // The sample holding an entry: samples cut the trace's entries evenly (snapshot_analysis.cpp).
    auto sample_of = [&](size_t entry) { return m.trace_entries ? entry * n / m.trace_entries : 0; };
    if (m.peak_entry >= 0) {
        const float x = x_of(sample_of(size_t(m.peak_entry)));
        dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p0.y + h), IM_COL32(255, 255, 255, 120));
        dl->AddText(ImVec2(x + 3, p0.y + 2), IM_COL32(230, 230, 235, 255),
                    fmt::format("peak {}", format_bytes(m.peak_allocated)).c_str());
    }
    for (const auto& o : m.ooms) {
        const float x = x_of(sample_of(o.entry));
        dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p0.y + h), kOomColor, 2.0f);
        dl->AddText(ImVec2(x + 3, p0.y + 16), kOomColor, "OOM");
    }
    dl->AddText(ImVec2(p0.x + w - 90, p0.y + 2), kTextDim, format_bytes(top).c_str());
    ImGui::InvisibleButton("snapshot_timeline", ImVec2(w, h));
    if (ImGui::IsItemHovered() && n > 0) {
        const size_t i = std::min(n - 1, size_t((ImGui::GetIO().MousePos.x - p0.x) / w * float(n)));
        const auto& s = samples[i];
        ImGui::BeginTooltip();
        ImGui::Text("entries up to %zu%s", s.last_entry,
                    s.time_us >= 0 ? fmt::format(", t = {:.3f} s", double(s.time_us) / 1e6).c_str() : "");
        ImGui::Text("allocated %s, reserved %s (measured, most in this slice)", format_bytes(s.allocated).c_str(),
                    format_bytes(s.reserved).c_str());
        ImGui::Text("cached by the allocator: %s", format_bytes(s.reserved - s.allocated).c_str());
        ImGui::EndTooltip();
    }
    legend_item(kAllocatedColor, "allocated");
    ImGui::SameLine();
    legend_item(kReservedColor, "reserved (segments)");
    ImGui::SameLine();
    legend_item(kOomColor, "OOM");
    ImGui::SameLine();
    ImGui::TextColored(ImColor(kTextDim), m.start_known ? "measured: replayed from the allocator's trace"
                                                        : "measured; the state before the trace is unknown (assumed empty)");
}

void draw_peak_tables(const snap::MemorySnapshot& s, const snap::DeviceMemory& m) {
    ImGui::Text("Alive at the peak (%s over %zu allocations), by the frame that allocated them:",
                format_bytes(m.peak_allocated).c_str(), m.at_peak.size());
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_Resizable;
    if (ImGui::BeginTable("sites", 4, flags, ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * 9))) {
        ImGui::TableSetupColumn("frame (first outside torch and C++)", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableSetupColumn("bytes");
        ImGui::TableSetupColumn("allocations");
        ImGui::TableSetupColumn("category");
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableHeadersRow();
        for (const auto& site : m.sites) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(snap::frame_label(s, site.frame).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(format_bytes(site.bytes).c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%lld", static_cast<long long>(site.count));
            ImGui::TableNextColumn();
            ImGui::Text("%s (%s)", snap::category_name(site.category), snap::category_basis(site.category));
        }
        ImGui::EndTable();
    }
    ImGui::Text("By category at the peak:");
    for (const auto& c : m.categories) {
        ImGui::SameLine();
        ImGui::Text("%s %s (%s);", snap::category_name(c.category), format_bytes(c.bytes).c_str(), snap::category_basis(c.category));
    }
}

}  // namespace

void draw_snapshot_view(AppState& app) {
    SnapshotState& st = app.snapshots;
    if (st.loading()) ImGui::TextColored(ImColor(kTextDim), "reading the snapshot...");
    if (st.empty()) {
        ImGui::TextWrapped("No memory snapshot open. File > Open a PyTorch snapshot (.pickle from "
                           "torch.cuda.memory._dump_snapshot, or its JSON form): docs/pytorch-memory.md.");
        return;
    }
    const auto& all = st.snapshots();
    st.selected = std::clamp(st.selected, 0, int(all.size()) - 1);
    const LoadedSnapshot& l = all[size_t(st.selected)];
    if (all.size() > 1) {
        ImGui::SetNextItemWidth(260);
        const auto label = [](const LoadedSnapshot& x) {
            return x.snapshot->rank >= 0 ? fmt::format("rank {}: {}", x.snapshot->rank, x.path) : x.path;
        };
        if (ImGui::BeginCombo("snapshot", label(l).c_str())) {
            for (int i = 0; i < int(all.size()); ++i)
                if (ImGui::Selectable(label(all[size_t(i)]).c_str(), i == st.selected)) st.selected = i, st.device = 0;
            ImGui::EndCombo();
        }
    } else {
        ImGui::TextUnformatted(l.path.c_str());
    }
    const auto& devices = l.analysis.devices;
    if (devices.empty()) {
        ImGui::TextWrapped("This snapshot holds no segments and no trace: nothing was allocated on a GPU.");
        return;
    }
    st.device = std::clamp(st.device, 0, int(devices.size()) - 1);
    if (devices.size() > 1) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(120);
        if (ImGui::BeginCombo("device", fmt::format("cuda:{}", devices[size_t(st.device)].device).c_str())) {
            for (int i = 0; i < int(devices.size()); ++i)
                if (ImGui::Selectable(fmt::format("cuda:{}", devices[size_t(i)].device).c_str(), i == st.device)) st.device = i;
            ImGui::EndCombo();
        }
    }
    const snap::DeviceMemory& m = devices[size_t(st.device)];
    ImGui::Text("At dump time (measured, the allocator's segments): reserved %s, allocated %s, active %s, %zu segments, "
                "largest free block %s",
                format_bytes(m.reserved_bytes).c_str(), format_bytes(m.allocated_bytes).c_str(),
                format_bytes(m.active_bytes).c_str(), m.segments, format_bytes(m.largest_free_block_at_dump).c_str());
    if (!m.has_trace) {
        ImGui::TextWrapped("No trace was recorded (record with torch.cuda.memory._record_memory_history before the "
                           "step): the timeline, the peak and what held it are unknown.");
        return;
    }
    ImGui::Text("Peak allocated %s at entry %lld of %zu; reserved then %s; cached (reserved - allocated) %s, largest "
                "free block %s",
                format_bytes(m.peak_allocated).c_str(), static_cast<long long>(m.peak_entry), m.trace_entries,
                format_bytes(m.reserved_at_peak).c_str(), format_bytes(m.free_in_segments_at_peak).c_str(),
                m.largest_free_block_at_peak >= 0 ? format_bytes(m.largest_free_block_at_peak).c_str() : "unknown");
    for (const auto& o : m.ooms)
        ImGui::TextColored(ImColor(kOomColor), "OOM at entry %zu: asked %s with %s allocated, %s reserved; the device had %s free",
                           o.entry, format_bytes(o.requested).c_str(), format_bytes(o.allocated).c_str(),
                           format_bytes(o.reserved).c_str(), o.device_free >= 0 ? format_bytes(o.device_free).c_str() : "unknown");
    draw_timeline(m, std::max(120.0f, ImGui::GetContentRegionAvail().y * 0.4f));
    draw_peak_tables(*l.snapshot, m);
    for (const auto& note : m.notes) ImGui::TextColored(ImColor(kWarnColor), "%s", note.c_str());
    for (const auto& w : l.snapshot->warnings) ImGui::TextColored(ImColor(kWarnColor), "%s", w.c_str());
}

}  // namespace us::gui
