#include "app/gui/state/lesson_player.h"

#include <fmt/format.h>

#include "app/gui/state/app_state.h"
#include "common/core/check.h"
#include "profiler/hang/hang_report.h"

namespace us::gui {

const lesson::LessonSet& LessonPlayer::lessons() {
    if (!m_loaded) {
        m_set = lesson::load_lessons(lesson::default_lessons_dir());
        m_loaded = true;
    }
    return m_set;
}

void LessonPlayer::open(const std::string& name) {
    const lesson::LessonSet& set = lessons();
    for (size_t i = 0; i < set.lessons.size(); ++i)
        if (set.lessons[i].name == name) {
            if (m_current != int(i)) {
                m_reports.clear();
                m_run_of_trace.clear();
                m_check.reset();
                show_answer = false;
            }
            m_current = int(i);
            views_pending = true;
            return;
        }
    std::string known;
    for (const auto& l : set.lessons) known += (known.empty() ? "" : ", ") + l.name;
    fail_user("no lesson '{}': the lessons are {} (ultrascope lesson --list)", name, known.empty() ? "(none)" : known);
}

void LessonPlayer::close() {
    m_current = m_running = m_next = -1;
    m_reports.clear();
    m_check.reset();
    m_run_of_trace.clear();
}

void LessonPlayer::launch(AppState& app, int index, bool then_the_rest) {
    const lesson::Lesson* l = current();
    if (!l || index < 0 || index >= int(l->runs.size())) return;
    const lesson::LessonRun& run = l->runs[size_t(index)];
    try {
        app::HostOptions hosts = app.settings.hosts;
        // a run on emulated nodes brings them; the others run as authored, on this machine's hosts settings
        if (run.nodes.count > 0)
            hosts.nodes = run.nodes;
        else
            hosts.nodes.count = 0;
        app.settings = LaunchSettings::from_args(run.args);
        app.settings.hosts = hosts;
    } catch (const UserError& e) {
        app.log.fail(fmt::format("lesson {}, run {}: {}", l->name, run.label, e.what()));
        return;
    }
    app.launch();
    if (app.source.kind() != Source::launched || !app.source.running()) {  // refused: the log says why
        m_running = m_next = -1;
        return;
    }
    app.log.message(fmt::format("lesson {}: run {} ({})", l->title, run.label, lesson::run_command_text(run)));
    m_running = index;
    m_run_identity = app.source.live();
    if (const std::string trace = app.source.trace_path(); !trace.empty()) m_run_of_trace[trace] = run.label;
    m_next = then_the_rest && index + 1 < int(l->runs.size()) ? index + 1 : -1;
    views_pending = true;
}

void LessonPlayer::update(AppState& app) {
    const lesson::Lesson* l = current();
    if (!l || m_running < 0) return;
    const app::LiveRun* live = app.source.live();
    if (live != m_run_identity || app.source.kind() != Source::launched) {  // replaced by another launch
        m_running = m_next = -1;
        return;
    }
    // The report is complete once the run is archived (it ended and the final derived build is in).
    if (!live->finished() || !app.comparison.current_archived) return;
    const lesson::LessonRun& run = l->runs[size_t(m_running)];
    // A run meant to hang succeeds by hanging: its report then carries what held it (the Hang view's analysis).
    if (run.hangs ? live->hung() : live->result_code() == 0) {
        nlohmann::json report = prof::report_json(app.report());
        if (run.hangs && app.hang.loaded()) report["hang"] = hang::hang_json(app.hang.loaded()->analysis);
        m_reports[run.label] = std::move(report);
        std::map<std::string, std::string> traces;  // the finished runs' traces, for claims over two runs' diff
        for (const auto& [trace, label] : m_run_of_trace)
            if (m_reports.count(label)) traces[label] = trace;
        lesson::add_lesson_diffs(*l, traces, m_reports);
        m_check = lesson::check_lesson(*l, m_reports);
    } else {
        app.log.message(fmt::format("lesson {}: run {} {}; its claims cannot be checked", l->name, run.label,
                                    run.hangs ? "was meant to hang and did not" : "failed"));
        m_next = -1;
    }
    m_running = -1;
    if (m_next >= 0) launch(app, m_next, true);
}

bool LessonPlayer::claim_ready(const lesson::Claim& claim) const {
    for (const lesson::Operand* o : {&claim.left, &claim.right})
        if (!o->run.empty() && !m_reports.count(o->run)) return false;
    return true;
}

std::string LessonPlayer::shown_run(const AppState& app) const {
    if (!current()) return {};
    const auto it = m_run_of_trace.find(app.source.trace_path());
    return it != m_run_of_trace.end() ? it->second : std::string();
}

std::vector<const lesson::Highlight*> LessonPlayer::highlights(const AppState& app) const {
    const lesson::Lesson* l = current();
    return l ? lesson::highlights_of_run(*l, shown_run(app)) : std::vector<const lesson::Highlight*>{};
}

}  // namespace us::gui
