// The Lessons panel: pick a lesson, read what to look at and which formula predicts it, launch its runs (one, or
// all of them in turn for the comparison), and see its claims checked against the measured reports as they come in.
#include <fmt/format.h>
#include <imgui.h>

#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"

namespace us::gui {

namespace {

void heading(const char* text) {
    ImGui::Spacing();
    ImGui::TextColored(ImVec4(0.55f, 0.75f, 1.0f, 1), "%s", text);
}

void paragraph(const std::string& text) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted(text.c_str());
    ImGui::PopTextWrapPos();
}

void draw_list(AppState& app) {
    const lesson::LessonSet& set = app.lessons.lessons();
    ImGui::TextWrapped(
        "Each lesson shows one idea of the Ultra-Scale Playbook on real ranks of this machine, in a "
        "minute or two, and checks its claim against what was measured.");
    for (const auto& l : set.lessons) {
        const std::string label = fmt::format("{:2d}. {}", l.order, l.title);
        if (ImGui::Selectable(label.c_str())) app.lessons.open(l.name);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("%s\n%zu run(s); ultrascope lesson %s --check", l.section.c_str(), l.runs.size(),
                              l.name.c_str());
    }
    for (const auto& e : set.errors) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.55f, 0.45f, 1), "not loaded: %s", e.message.c_str());
        ImGui::PopTextWrapPos();
    }
}

ImVec4 status_color(bool ready, const lesson::ClaimResult* r) {
    if (!ready || !r) return ImVec4(0.65f, 0.65f, 0.65f, 1);
    switch (r->status) {
        case lesson::ClaimStatus::held:
            return ImVec4(0.45f, 0.9f, 0.5f, 1);
        case lesson::ClaimStatus::failed:
            return ImVec4(1, 0.45f, 0.4f, 1);
        case lesson::ClaimStatus::not_here:
            return ImVec4(0.65f, 0.7f, 0.8f, 1);
        default:
            return ImVec4(1, 0.75f, 0.3f, 1);
    }
}

const char* status_word(bool ready, const lesson::ClaimResult* r) {
    if (!ready || !r) return "waiting";
    switch (r->status) {
        case lesson::ClaimStatus::held:
            return "holds";
        case lesson::ClaimStatus::failed:
            return "does not hold";
        case lesson::ClaimStatus::not_here:
            return "not checked on this machine";
        default:
            return "cannot check";
    }
}

// The title, what to look at, the formula, the question to ask and its answer.
void draw_text(LessonPlayer& player, const lesson::Lesson& l) {
    ImGui::SetWindowFontScale(1.25f);
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted(l.title.c_str());
    ImGui::PopTextWrapPos();
    ImGui::SetWindowFontScale(1.0f);
    ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "Playbook: %s", l.section.c_str());
    heading("Look at");
    paragraph(l.look_at);
    if (!l.formula_gives_answer) {
        heading("The formula");
        paragraph(l.formula);
    }
    heading("Ask the class");
    paragraph(l.question);
    if (!l.answer.empty()) {
        ImGui::Checkbox(l.formula_gives_answer ? "show the formula and the answer" : "show the answer",
                        &player.show_answer);
        if (player.show_answer && l.formula_gives_answer) paragraph("Formula: " + l.formula);
        if (player.show_answer) paragraph(l.answer);
    }
}

// The lesson's runs: each launched (again) on its own, or all of them in turn.
void draw_runs(AppState& app, const lesson::Lesson& l) {
    LessonPlayer& player = app.lessons;
    heading("Runs");
    const bool busy = player.busy() || app.source.running();
    for (size_t i = 0; i < l.runs.size(); ++i) {
        const lesson::LessonRun& run = l.runs[i];
        ImGui::PushID(int(i));
        const bool done = player.reports().count(run.label) > 0;
        if (player.running_index() == int(i))
            ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.5f, 1), "running");
        else {
            ImGui::BeginDisabled(busy);
            if (ImGui::SmallButton(done ? "again" : "launch")) player.launch(app, int(i), false);
            ImGui::EndDisabled();
        }
        ImGui::SameLine();
        ImGui::Text("%s%s", run.label.c_str(), done ? "  (measured)" : "");
        if (!run.note.empty()) {
            ImGui::SameLine();
            ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "- %s", run.note.c_str());
        }
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", lesson::run_command_text(run).c_str());
        ImGui::PopID();
    }
    if (l.runs.size() > 1) {
        ImGui::BeginDisabled(busy);
        if (ImGui::Button("Launch every run in turn")) player.launch(app, 0, true);
        ImGui::EndDisabled();
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("one after the other; the Compare tab shows them side by side");
    }
}

// One claim: its status, what it says, and the figures it was checked on (or why it says so, before they come).
void draw_claim(const lesson::Claim& c, bool ready, const lesson::ClaimResult* r) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(status_color(ready, r), "[%s]", status_word(ready, r));
    ImGui::SameLine();
    ImGui::TextUnformatted(c.says.c_str());
    const bool compared = r && (r->status == lesson::ClaimStatus::held || r->status == lesson::ClaimStatus::failed);
    if (ready && compared) {
        // "measured zero3: rank.memory_peak_bytes.params ...: 1.2 MiB  ~ within 2%  formula ...: 1.2 MiB", then why
        // it should hold (the explanation would say the claim and its figures again)
        auto side = [](const lesson::OperandResult& o) {
            if (o.source == lesson::FigureSource::constant) return o.shown;
            return fmt::format("{} {}: {}", lesson::source_name(o.source), o.what, o.shown);
        };
        ImGui::TextColored(ImVec4(0.75f, 0.75f, 0.75f, 1), "%s  %s  %s (%s)", side(r->measured).c_str(),
                           r->comparison.c_str(), side(r->expected).c_str(), r->difference.c_str());
        if (!c.why.empty()) ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1), "why: %s", c.why.c_str());
    } else if (ready && r) {  // not checked here, or not evaluable: the explanation says why
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", r->explanation.c_str());
    } else if (!c.why.empty()) {
        ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1), "why: %s", c.why.c_str());
    }
    ImGui::PopTextWrapPos();
}

// The claims checked on the measured runs, then what the check adds beyond them: runs whose figures miss their
// prediction, unexplained.
void draw_claims(const LessonPlayer& player, const lesson::Lesson& l) {
    heading("The claim, checked on the measured runs");
    const auto& check = player.check();
    for (size_t i = 0; i < l.claims.size(); ++i) {
        const lesson::Claim& c = l.claims[i];
        draw_claim(c, player.claim_ready(c), check && i < check->claims.size() ? &check->claims[i] : nullptr);
    }
    for (size_t i = l.claims.size(); check && i < check->claims.size(); ++i) {
        const lesson::ClaimResult& r = check->claims[i];
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(status_color(true, &r), "[%s]", status_word(true, &r));
        ImGui::SameLine();
        ImGui::TextUnformatted(r.says.c_str());
        ImGui::TextColored(ImVec4(0.75f, 0.75f, 0.75f, 1), "%s", r.explanation.c_str());
        ImGui::PopTextWrapPos();
    }
}

void draw_lesson(AppState& app, const lesson::Lesson& l) {
    LessonPlayer& player = app.lessons;
    if (ImGui::SmallButton("< all lessons")) {
        player.close();
        return;
    }
    draw_text(player, l);
    draw_runs(app, l);
    heading("Where to look");
    for (const auto& h : l.highlights)
        ImGui::BulletText("%s: %s%s%s", h.view.c_str(), h.note.c_str(), h.run.empty() ? "" : " - run ", h.run.c_str());
    // The notes are drawn over the views only while they show one of this lesson's runs.
    if (const std::string shown = player.shown_run(app); !shown.empty())
        ImGui::TextDisabled("the views show run %s: its notes are drawn over them", shown.c_str());
    else
        ImGui::TextDisabled("the views show no run of this lesson: launch one to see the notes over them");
    draw_claims(player, l);
}

}  // namespace

void draw_lessons_panel(AppState& app) {
    if (const lesson::Lesson* l = app.lessons.current())
        draw_lesson(app, *l);
    else
        draw_list(app);
}

}  // namespace us::gui
