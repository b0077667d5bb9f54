// The GUI's side of workshop lessons (app/lesson/lesson.h): which lesson is open, launching its runs through the
// launch panel's machinery one after another, keeping each finished run's report, and checking the lesson's claims
// as the reports come in. The views the lesson names come forward and its figures are outlined
// (platform/frame_layout.cpp).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/lesson/lesson.h"

namespace us::gui {

class AppState;

class LessonPlayer {
public:
    // The lessons of assets/lessons (loaded on first use; bad files are listed with their reason).
    const lesson::LessonSet& lessons();
    const lesson::Lesson* current() const { return m_current >= 0 ? &m_set.lessons[size_t(m_current)] : nullptr; }
    // Opens a lesson by name (UserError when there is none) and forgets the previous one's reports.
    void open(const std::string& name);
    void close();

    // Launches run `index` of the open lesson with the launch panel's settings set to it; with `then_the_rest`,
    // each later run launches when the one before finishes (the comparison).
    void launch(AppState& app, int index, bool then_the_rest);
    // Once per frame: takes the report of a lesson run that finished and re-checks the claims.
    void update(AppState& app);
    // A lesson run is launched and not finished, or more are queued.
    bool busy() const { return m_running >= 0 || m_next >= 0; }
    int running_index() const { return m_running; }

    bool show_answer = false;
    // The views to bring forward this frame (set when a lesson opens or a run is launched; taken by
    // platform/frame_layout.cpp).
    bool views_pending = false;

    const std::map<std::string, nlohmann::json>& reports() const { return m_reports; }  // by run label
    // The claims against the reports so far; nullopt until some run has finished.
    const std::optional<lesson::LessonCheck>& check() const { return m_check; }
    // Whether every run a claim reads has a report (otherwise the claim is still waiting, not failed).
    bool claim_ready(const lesson::Claim& claim) const;

    // The label of the lesson run whose data the windows show, by its trace file ("" when they show anything else:
    // a run launched or edited from the panel, another trace). The lesson's notes belong to its own runs only.
    std::string shown_run(const AppState& app) const;
    // The highlights to draw now: the shown run's (lesson::highlights_of_run), none over another run.
    std::vector<const lesson::Highlight*> highlights(const AppState& app) const;

private:
    lesson::LessonSet m_set;
    bool m_loaded = false;
    int m_current = -1;
    int m_running = -1;                    // the lesson run launched, until it finishes
    int m_next = -1;                       // the run to launch when it does (then_the_rest)
    const void* m_run_identity = nullptr;  // the live run it was launched as (a relaunch from the panel is not it)
    std::map<std::string, nlohmann::json> m_reports;
    std::map<std::string, std::string> m_run_of_trace;  // trace file -> label of the lesson run that wrote it
    std::optional<lesson::LessonCheck> m_check;
};

}  // namespace us::gui
