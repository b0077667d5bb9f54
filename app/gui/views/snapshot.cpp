// The memory snapshot view: a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) per rank and device.
// Allocated bytes by inferred category and reserved bytes over the recorded trace (measured by the caching
// allocator, replayed; the gap is the allocator's cache), zoomable down to single allocations, the peak and OOMs
// marked; what was alive at the peak, by the user's frame that allocated it and by category (inferred from the
// frames, else unknown); fragmentation at the peak; the dump-time state. docs/pytorch-memory.md: how each is made.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app/gui/state/app_state.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "common/core/format.h"
#include "profiler/snapshot/frame_rules.h"

namespace us::gui {

namespace {

constexpr ImU32 kReservedColor = IM_COL32(230, 200, 90, 255);
constexpr ImU32 kOomColor = IM_COL32(240, 70, 60, 255);

constexpr ImU32 kCategoryColors[snap::kSnapshotCategories] =
    {  // parameters, optimizer state, gradients, activations, unknown
        IM_COL32(60, 150, 80, 220), IM_COL32(215, 170, 40, 220), IM_COL32(70, 110, 220, 220),
        IM_COL32(220, 80, 70, 220), IM_COL32(110, 110, 120, 220)};

// Wheel: zoom around the cursor; drag: zoom into the dragged slice; double-click: all of the trace.
void handle_zoom(SnapshotZoom& z, float& drag_from, size_t n, float x0, float w) {
    const ImGuiIO& io = ImGui::GetIO();
    const double span = double(z.e1 - z.e0);
    const double f = std::clamp(double(io.MousePos.x - x0) / double(w), 0.0, 1.0);
    if (ImGui::IsItemHovered() && io.MouseWheel != 0) {
        const double at = double(z.e0) + f * span;
        const double want =
            std::clamp(span * std::pow(0.8, double(io.MouseWheel)), std::min(16.0, double(n)), double(n));
        const double a = std::clamp(at - f * want, 0.0, double(n) - want);
        z.e0 = size_t(a), z.e1 = std::clamp(size_t(a + want + 0.5), z.e0 + 1, n);
    }
    if (ImGui::IsItemHovered() && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left))
        z.e0 = 0, z.e1 = n, drag_from = -1;
    if (ImGui::IsItemActivated()) drag_from = io.MousePos.x;
    if (ImGui::IsItemActive() && drag_from >= 0 && std::abs(io.MousePos.x - drag_from) > 4)
        ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(std::min(drag_from, io.MousePos.x), ImGui::GetItemRectMin().y),
                                                  ImVec2(std::max(drag_from, io.MousePos.x), ImGui::GetItemRectMax().y),
                                                  IM_COL32(255, 255, 255, 40));
    if (ImGui::IsItemDeactivated() && drag_from >= 0) {
        const float a = std::min(drag_from, io.MousePos.x), b = std::max(drag_from, io.MousePos.x);
        if (b - a > 4) {
            auto entry = [&](float x) {
                return double(z.e0) + std::clamp(double(x - x0) / double(w), 0.0, 1.0) * span;
            };
            const size_t e0 = size_t(entry(a)), e1 = std::min(n, size_t(std::ceil(entry(b))));
            if (e1 > e0) z.e0 = e0, z.e1 = e1;
        }
        drag_from = -1;
    }
}

// The plot's frame: where it is, the entries it spans and the bytes at its top.
struct SnapshotPlot {
    ImDrawList* dl = nullptr;
    ImVec2 p0;
    float w = 0, h = 0;
    size_t e0 = 0, e1 = 1;
    int64_t top = 1;
    float x_of(double entry) const { return p0.x + w * float((entry - double(e0)) / double(e1 - e0)); }
    float y_of(int64_t v) const { return p0.y + h - h * float(double(v) / double(top)); }
    bool shown(int64_t entry) const { return entry >= int64_t(e0) && entry < int64_t(e1); }
};

// The zoom's samples, re-made only when the window, the device or the width changes.
const std::vector<snap::SeriesSample>& zoom_samples(SnapshotState& st, const snap::SnapshotSeries& series,
                                                    size_t columns) {
    const size_t n = series.size();
    SnapshotZoom& z = st.zoom;
    if (z.selected != st.selected || z.device != st.device)
        z = SnapshotZoom{}, z.selected = st.selected, z.device = st.device;
    if (z.e1 == 0 || z.e1 > n || z.e0 >= z.e1) z.e0 = 0, z.e1 = n;
    if (z.columns != columns || z.made_e0 != z.e0 || z.made_e1 != z.e1) {
        z.samples = snap::sample_window(series, z.e0, z.e1, columns);
        z.columns = columns, z.made_e0 = z.e0, z.made_e1 = z.e1;
    }
    return z.samples;
}

// One column per slice: its categories stacked, then reserved as a line; the peak and the OOMs marked.
void draw_slices(const SnapshotPlot& plot, const std::vector<snap::SeriesSample>& samples,
                 const snap::DeviceMemory& m) {
    ImDrawList* dl = plot.dl;
    float prev_reserved_y = -1;
    for (const auto& s : samples) {
        const float x0 = plot.x_of(double(s.first_entry)),
                    x1 = std::max(x0 + 1.0f, plot.x_of(double(s.last_entry + 1)));
        float y = plot.p0.y + plot.h;
        for (size_t c = 0; c < snap::kSnapshotCategories; ++c) {
            const float dy = plot.h * float(double(std::max<int64_t>(0, s.by_category[c])) / double(plot.top));
            if (dy > 0) dl->AddRectFilled(ImVec2(x0, y - dy), ImVec2(x1, y), kCategoryColors[c]);
            y -= dy;
        }
        const float ry = plot.y_of(s.reserved);
        if (prev_reserved_y >= 0) dl->AddLine(ImVec2(x0, prev_reserved_y), ImVec2(x0, ry), kReservedColor);
        dl->AddLine(ImVec2(x0, ry), ImVec2(x1, ry), kReservedColor, 1.5f);
        prev_reserved_y = ry;
    }
    if (m.peak_entry >= 0 && plot.shown(m.peak_entry)) {
        const float x = plot.x_of(double(m.peak_entry) + 0.5);
        dl->AddLine(ImVec2(x, plot.p0.y), ImVec2(x, plot.p0.y + plot.h), IM_COL32(255, 255, 255, 120));
        dl->AddText(ImVec2(x + 3, plot.p0.y + 2), IM_COL32(230, 230, 235, 255),
                    fmt::format("peak {}", format_bytes(m.peak_allocated)).c_str());
    }
    for (const auto& o : m.ooms) {
        if (!plot.shown(int64_t(o.entry))) continue;
        const float x = plot.x_of(double(o.entry) + 0.5);
        dl->AddLine(ImVec2(x, plot.p0.y), ImVec2(x, plot.p0.y + plot.h), kOomColor, 2.0f);
        dl->AddText(ImVec2(x + 3, plot.p0.y + 2 + ImGui::GetTextLineHeight()), kOomColor, "OOM");
    }
    // The scale's top at the left, clear of the markers (an OOM is often the last entry, at the right).
    dl->AddText(ImVec2(plot.p0.x + 4, plot.p0.y + 2), kTextDim, fmt::format("top {}", format_bytes(plot.top)).c_str());
}

// The hovered slice's figures; zoomed in to one entry, what it was.
void slice_tooltip(const SnapshotPlot& plot, const std::vector<snap::SeriesSample>& samples, const LoadedSnapshot& l,
                   const snap::DeviceMemory& m) {
    const double entry =
        double(plot.e0) + std::clamp(double(ImGui::GetIO().MousePos.x - plot.p0.x) / double(plot.w), 0.0, 1.0) *
                              double(plot.e1 - plot.e0);
    auto it = std::upper_bound(samples.begin(), samples.end(), entry,
                               [](double e, const snap::SeriesSample& s) { return e < double(s.first_entry); });
    const auto& s = *(it == samples.begin() ? it : it - 1);
    const auto& trace = l.snapshot->device_traces[size_t(m.device)];
    ImGui::BeginTooltip();
    const int64_t t = trace[s.peak_entry].time_us;
    ImGui::Text("entries %zu-%zu%s", s.first_entry, s.last_entry,
                t >= 0 ? fmt::format(", t = {:.6f} s", double(t) / 1e6).c_str() : "");
    ImGui::Text("allocated %s, reserved %s (measured, most in this slice)", format_bytes(s.allocated).c_str(),
                format_bytes(s.reserved).c_str());
    ImGui::Text("cached by the allocator: %s", format_bytes(s.reserved - s.allocated).c_str());
    for (size_t c = snap::kSnapshotCategories; c-- > 0;)
        if (s.by_category[c] != 0)
            ImGui::TextColored(ImColor(kCategoryColors[c]), "%-16s %s (%s)",
                               snap::category_name(snap::MemoryCategory(c)), format_bytes(s.by_category[c]).c_str(),
                               snap::category_basis(snap::MemoryCategory(c)));
    if (s.first_entry == s.last_entry) {
        const snap::TraceEntry& e = trace[s.first_entry];
        ImGui::Separator();
        ImGui::Text("%s of %s at 0x%llx", snap::trace_action_name(e.action), format_bytes(e.size).c_str(),
                    static_cast<unsigned long long>(e.addr));
        ImGui::Text("by %s", snap::frame_label(*l.snapshot, snap::user_frame(*l.snapshot, e.stack)).c_str());
    }
    ImGui::EndTooltip();
}

void draw_legend(const snap::DeviceMemory& m, const SnapshotZoom& z, size_t n) {
    for (size_t c = 0; c < snap::kSnapshotCategories; ++c) {
        legend_item(kCategoryColors[c], snap::category_name(snap::MemoryCategory(c)));
        ImGui::SameLine();
    }
    legend_item(kReservedColor, "reserved (segments)");
    ImGui::SameLine();
    legend_item(kOomColor, "OOM");
    ImGui::TextColored(ImColor(kTextDim),
                       "%s; categories inferred from the frames (else unknown); entries %zu-%zu of %zu%s",
                       m.start_known ? "measured: replayed from the allocator's trace"
                                     : "measured; the state before the trace is unknown (assumed empty)",
                       z.e0, z.e1 == 0 ? 0 : z.e1 - 1, n,
                       z.e1 - z.e0 < n ? " (wheel or drag to zoom, double-click for all)" : " (wheel or drag to zoom)");
}

// Allocated as a stack of its inferred categories under reserved (a line), over the window of the trace shown,
// re-sampled for it (each column the moment its slice holds the most); the peak and OOMs marked; a hover readout.
void draw_timeline(SnapshotState& st, SnapshotViewState& view, const LoadedSnapshot& l, const snap::DeviceMemory& m,
                   float height) {
    const snap::SnapshotSeries& series = l.series[size_t(st.device)];
    const size_t n = series.size();
    SnapshotPlot plot;
    plot.dl = ImGui::GetWindowDrawList();
    plot.p0 = ImGui::GetCursorScreenPos();
    plot.w = std::max(50.0f, ImGui::GetContentRegionAvail().x - 4), plot.h = height;
    const auto& samples = zoom_samples(st, series, size_t(plot.w));
    SnapshotZoom& z = st.zoom;
    plot.e0 = z.e0, plot.e1 = z.e1;
    plot.dl->AddRectFilled(plot.p0, ImVec2(plot.p0.x + plot.w, plot.p0.y + plot.h), IM_COL32(24, 26, 32, 255));
    for (const auto& s : samples) plot.top = std::max({plot.top, s.reserved, s.allocated});
    draw_slices(plot, samples, m);
    ImGui::InvisibleButton("snapshot_timeline", ImVec2(plot.w, plot.h));
    handle_zoom(z, view.drag_from, n, plot.p0.x, plot.w);
    if (ImGui::IsItemHovered() && !samples.empty()) slice_tooltip(plot, samples, l, m);
    draw_legend(m, z, n);
}

void draw_peak_tables(const snap::MemorySnapshot& s, const snap::DeviceMemory& m) {
    ImGui::Text("Alive at the peak (%s over %zu allocations), by the frame that allocated them:",
                format_bytes(m.peak_allocated).c_str(), m.at_peak.size());
    const ImGuiTableFlags flags =
        ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable;
    if (ImGui::BeginTable("sites", 4, flags, ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * 9))) {
        ImGui::TableSetupColumn("frame (first outside torch and C++)", ImGuiTableColumnFlags_WidthStretch, 3.0f);
        ImGui::TableSetupColumn("bytes", ImGuiTableColumnFlags_WidthStretch, 1.0f);
        ImGui::TableSetupColumn("allocations", ImGuiTableColumnFlags_WidthStretch, 1.0f);
        ImGui::TableSetupColumn("category", ImGuiTableColumnFlags_WidthStretch, 3.0f);
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
            if (site.category == snap::MemoryCategory::unknown)
                ImGui::TextUnformatted("unknown (no frame tells)");
            else
                ImGui::Text("%s (%s)", snap::category_name(site.category), snap::category_basis(site.category));
        }
        ImGui::EndTable();
    }
    ImGui::Text("By category at the peak:");
    for (const auto& c : m.categories) {
        ImGui::SameLine();
        const bool unknown = c.category == snap::MemoryCategory::unknown;
        ImGui::Text("%s %s%s;", snap::category_name(c.category), format_bytes(c.bytes).c_str(),
                    unknown ? "" : fmt::format(" ({})", snap::category_basis(c.category)).c_str());
    }
}

}  // namespace

void draw_snapshot_view(AppState& app) {
    SnapshotState& st = app.snapshots;
    if (st.loading()) ImGui::TextColored(ImColor(kTextDim), "reading the snapshot...");
    if (st.empty()) {
        ImGui::TextWrapped(
            "No memory snapshot open. File > Open a PyTorch snapshot (.pickle from "
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
                if (ImGui::Selectable(fmt::format("cuda:{}", devices[size_t(i)].device).c_str(), i == st.device))
                    st.device = i;
            ImGui::EndCombo();
        }
    }
    const snap::DeviceMemory& m = devices[size_t(st.device)];
    ImGui::Text(
        "At dump time (measured, the allocator's segments): reserved %s, allocated %s, active %s, %zu segments, "
        "largest free block %s",
        format_bytes(m.reserved_bytes).c_str(), format_bytes(m.allocated_bytes).c_str(),
        format_bytes(m.active_bytes).c_str(), m.segments, format_bytes(m.largest_free_block_at_dump).c_str());
    if (!m.has_trace) {
        ImGui::TextWrapped(
            "No trace was recorded (record with torch.cuda.memory._record_memory_history before the "
            "step): the timeline, the peak and what held it are unknown.");
        return;
    }
    ImGui::Text(
        "Peak allocated %s at entry %lld of %zu; reserved then %s; cached (reserved - allocated) %s, largest "
        "free block %s",
        format_bytes(m.peak_allocated).c_str(), static_cast<long long>(m.peak_entry), m.trace_entries,
        format_bytes(m.reserved_at_peak).c_str(), format_bytes(m.free_in_segments_at_peak).c_str(),
        m.largest_free_block_at_peak >= 0 ? format_bytes(m.largest_free_block_at_peak).c_str() : "unknown");
    for (const auto& o : m.ooms)
        ImGui::TextColored(
            ImColor(kOomColor), "OOM at entry %zu: asked %s with %s allocated, %s reserved; the device had %s free",
            o.entry, format_bytes(o.requested).c_str(), format_bytes(o.allocated).c_str(),
            format_bytes(o.reserved).c_str(), o.device_free >= 0 ? format_bytes(o.device_free).c_str() : "unknown");
    draw_timeline(st, app.views.snapshot, l, m, std::max(120.0f, ImGui::GetContentRegionAvail().y * 0.4f));
    draw_peak_tables(*l.snapshot, m);
    for (const auto& note : m.notes) ImGui::TextColored(ImColor(kWarnColor), "%s", note.c_str());
    for (const auto& w : l.snapshot->warnings) ImGui::TextColored(ImColor(kWarnColor), "%s", w.c_str());
}

}  // namespace us::gui
