// File > Attach to a PyTorch job (attach_state.h): where the jobs are looked for (this node, or agents with their
// token), the jobs seen with their ranks, "Capture N steps" of one, a line per rank while the capture waits, Cancel,
// and the capture's error as the CLI words it. A finished capture opens as a run (AppState::update).
#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "app/gui/views/views.h"
#include "app/gui/widgets/theme.h"

namespace us::gui {
namespace {

const ImVec4 kErrorText(1, 0.5f, 0.45f, 1);

void text_input(const char* label, const char* hint, std::string& value, float width, ImGuiInputTextFlags flags = 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s", value.c_str());
    ImGui::SetNextItemWidth(em(width));
    if (ImGui::InputTextWithHint(label, hint, buf, sizeof buf, flags)) value = buf;
}

// Where the jobs are looked for: this node's endpoint, or the agents typed in.
void draw_where(AttachState& st) {
    const bool running = st.worker.running();
    ImGui::BeginDisabled(running);
    text_input("Agents", "HOST:PORT,...  (empty: this node)", st.agents, 260);
    ImGui::SameLine();
    text_input("Token", "the agents' token", st.token, 160, ImGuiInputTextFlags_Password);
    ImGui::SameLine();
    if (ImGui::Button("Refresh")) st.relist();
    ImGui::EndDisabled();
    ImGui::TextDisabled("Jobs polling %s%s", st.listing.where().c_str(), st.listing.asking() ? " (asking...)" : "");
    if (!st.listing.error().empty()) ImGui::TextColored(kErrorText, "%s", st.listing.error().c_str());
}

// The state of a rank in the capture running, else whether it still polls.
std::string rank_state(const CaptureProgressView& p, const ListedJob& job, const ListedRank& r) {
    for (const CaptureRankRow& row : p.ranks)
        if (row.pid == r.pid && (row.node.empty() ? job.node == "this node" : row.node == job.node))
            return row.line.empty() ? app::rank_state_name(row.state) : row.line;
    return r.alive ? "polling" : "exited";
}

void draw_job(AttachState& st, const ListedJob& job, const CaptureProgressView& progress, size_t index) {
    ImGui::PushID(int(index));
    ImGui::Separator();
    ImGui::Text("%s  (on %s)", job.describe.c_str(), job.node.c_str());
    if (const int n = st.captures_of(job.id); n > 0)
        ImGui::TextDisabled("captured %d time%s this session (the Compare tab holds them side by side)", n,
                            n == 1 ? "" : "s");
    if (ImGui::BeginTable("ranks", 4, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
        for (const char* h : {"rank", "pid", "host"}) ImGui::TableSetupColumn(h);
        ImGui::TableSetupColumn("state", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableHeadersRow();
        for (const ListedRank& r : job.ranks) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text(r.rank >= 0 ? "%d" : "-", r.rank);
            ImGui::TableNextColumn();
            ImGui::Text("%d", r.pid);
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(r.host.c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(rank_state(progress, job, r).c_str());
        }
        ImGui::EndTable();
    }
    ImGui::BeginDisabled(st.worker.running());
    char label[64];
    std::snprintf(label, sizeof label, "Capture %d step%s", st.steps, st.steps == 1 ? "" : "s");
    if (ImGui::Button(label)) st.capture(job.id);
    ImGui::EndDisabled();
    ImGui::PopID();
}

// The capture running: each node's line, each rank's (ranks not in the listing too: another node's), Cancel.
void draw_capture_progress(AttachState& st, const CaptureProgressView& p) {
    ImGui::Separator();
    ImGui::Text("Capturing %d step%s into %s (%.0f s)", st.worker.options().steps,
                st.worker.options().steps == 1 ? "" : "s", st.worker.options().out.c_str(), p.seconds);
    for (const std::string& l : p.node_lines) ImGui::TextWrapped("%s", l.c_str());
    for (const CaptureRankRow& r : p.ranks)
        ImGui::BulletText("%s%s", r.node.empty() ? "" : (r.node + ": ").c_str(),
                          r.line.empty() ? app::rank_state_name(r.state) : r.line.c_str());
    for (const std::string& r : p.retries) ImGui::TextColored(kErrorText, "%s", r.c_str());
    ImGui::BeginDisabled(st.worker.cancelling());
    if (ImGui::Button(st.worker.cancelling() ? "Cancelling..." : "Cancel")) st.worker.cancel();
    ImGui::EndDisabled();
}

void draw_no_job(const AttachState& st) {
    if (!st.listing.error().empty() || !st.listing.started()) return;
    ImGui::TextWrapped(
        "No PyTorch job polls %s yet. Start the job with KINETO_USE_DAEMON=1 in its environment (and KINETO_CONFIG "
        "naming a file that holds ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1 for a poll a second; else every 5 s): it "
        "shows here at its first poll.",
        st.listing.where().c_str());
}

}  // namespace

void draw_attach_view(AppState& app) {
    AttachState& st = app.attach_job;
    draw_where(st);
    ImGui::BeginDisabled(st.worker.running());
    ImGui::SetNextItemWidth(em(110));
    if (ImGui::InputInt("Steps", &st.steps)) st.steps = std::clamp(st.steps, 1, 1000);
    ImGui::SameLine();
    text_input("Folder", ("empty: a new one in " + default_captures_dir()).c_str(), st.out_dir, 320);
    ImGui::EndDisabled();
    const CaptureProgressView progress = st.worker.progress();
    const std::vector<ListedJob>& jobs = st.listing.jobs();
    if (jobs.empty()) draw_no_job(st);
    for (size_t i = 0; i < jobs.size(); ++i) draw_job(st, jobs[i], progress, i);
    if (st.worker.running()) draw_capture_progress(st, progress);
    if (!st.error.empty()) {
        ImGui::Separator();
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(kErrorText, "%s", st.error.c_str());
        ImGui::PopTextWrapPos();
    }
    if (!st.last_message.empty()) ImGui::TextWrapped("%s", st.last_message.c_str());
}

}  // namespace us::gui
