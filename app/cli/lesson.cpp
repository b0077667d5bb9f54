// `ultrascope lesson`: the workshop lessons (docs/lessons.md). --list names them; NAME prints a lesson's text and
// the commands of its runs; NAME --check runs them headless and checks the lesson's claim against the measured
// reports: exit 0 when every claim holds, 1 when one does not (or a run failed), 2 for bad input (an unknown
// lesson, a malformed lesson file, a claim naming a key the report lacks).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "app/report/run_report.h"
#include "app/launch/process_guard.h"
#include "app/lesson/lesson.h"
#include "common/core/check.h"
#include "profiler/analysis/report.h"

namespace us::app {
namespace {

using lesson::ClaimStatus;

void print_lesson(const lesson::Lesson& l) {
    // A formula that would give the answer away is printed with it (--answer), after the class has tried.
    const std::string formula = l.formula_gives_answer ? "with the answer (it gives it away)" : l.formula;
    std::printf("%s  (lesson %d: %s)\nPlaybook: %s\n\nWhat to look at: %s\nFormula: %s\nAsk the class: %s\n",
                l.title.c_str(), l.order, l.name.c_str(), l.section.c_str(), l.look_at.c_str(), formula.c_str(),
                l.question.c_str());
    if (!l.answer.empty())
        std::printf("Answer%s (on request): ultrascope lesson %s --answer\n",
                    l.formula_gives_answer ? " and formula" : "", l.name.c_str());
    std::printf("\nRuns:\n");
    for (const auto& r : l.runs)
        std::printf("  %-10s %s%s%s\n", r.label.c_str(), lesson::run_command_text(r).c_str(),
                    r.note.empty() ? "" : "\n             ", r.note.c_str());
    for (const auto& p : l.plans)
        std::printf("  %-10s %s%s%s\n", p.label.c_str(), lesson::plan_command_text(p).c_str(),
                    p.note.empty() ? "" : "\n             ", p.note.c_str());
    std::string views;
    for (const auto& v : l.views) views += (views.empty() ? "" : ", ") + v;
    std::printf("\nViews: %s\n", views.c_str());
    for (const auto& h : l.highlights)
        std::printf("  %-9s %s%s%s\n", h.view.c_str(), h.key.c_str(), h.run.empty() ? "" : (" (" + h.run + ")").c_str(),
                    h.note.empty() ? "" : ("  " + h.note).c_str());
    std::printf("\nThe claim (ultrascope lesson %s --check):\n", l.name.c_str());
    for (const auto& c : l.claims) std::printf("  - %s\n", c.says.c_str());
}

int list_lessons(const lesson::LessonSet& set) {
    for (const auto& l : set.lessons)
        std::printf("%2d  %-17s %-58s %d run(s)%s\n", l.order, l.name.c_str(), l.title.c_str(), int(l.runs.size()),
                    l.slow ? ", slow check" : "");
    for (const auto& e : set.errors) std::fprintf(stderr, "ultrascope lesson: not loaded: %s\n", e.message.c_str());
    return set.errors.empty() ? 0 : 2;
}

// The report of a trace written earlier: the document `ultrascope report --json` prints.
nlohmann::json report_of_trace(const std::string& path) {
    return run_report_json(make_run_report(ReportSource::of_files({path}), ReportOptions{}));
}

int check_lesson(const lesson::Lesson& l, const std::string& trace_dir, const std::string& from_traces,
                 const std::string& train_binary, bool verbose) {
    std::map<std::string, nlohmann::json> reports;
    std::map<std::string, std::string> traces;  // label -> trace, for the claims over two runs' diff
    bool runs_ok = true;
    double total_s = 0;
    for (size_t i = 0; i < l.runs.size(); ++i) {
        const auto& run = l.runs[i];
        if (!from_traces.empty()) {
            const std::string path = from_traces + "/lesson-" + l.name + "-" + run.label + ".ustrace";
            std::printf("[%zu/%zu] %s: %s\n", i + 1, l.runs.size(), run.label.c_str(), path.c_str());
            reports[run.label] = report_of_trace(path);
            traces[run.label] = path;
            continue;
        }
        std::printf("[%zu/%zu] %s: %s\n", i + 1, l.runs.size(), run.label.c_str(),
                    lesson::run_command_text(run).c_str());
        std::fflush(stdout);
        lesson::RunOptions options;
        options.trace_dir = trace_dir;
        options.train_binary = train_binary;
        if (verbose) options.on_message = [](const std::string& m) { std::fprintf(stderr, "  %s\n", m.c_str()); };
        const lesson::RunResult r = lesson::run_lesson_run(l, run, options);
        total_s += r.seconds;
        std::printf("      %s in %.1f s, trace %s\n", r.ok() ? "done" : "FAILED", r.seconds, r.trace_path.c_str());
        for (const auto& p : r.problems) std::printf("      %s\n", p.c_str());
        runs_ok &= r.ok();
        if (!r.report.is_null()) {
            reports[run.label] = r.report;
            traces[run.label] = r.trace_path;
        }
        if (app::stop_signal() != 0) return 1;
    }
    for (const auto& p : l.plans) {  // the planner runs nothing: its figures come at once
        std::printf("[plan] %s: %s\n", p.label.c_str(), lesson::plan_command_text(p).c_str());
        reports[p.label] = lesson::evaluate_lesson_plan(p);
    }
    lesson::add_lesson_diffs(l, traces, reports);
    const lesson::LessonCheck check = lesson::check_lesson(l, reports);
    std::printf("\nClaims of '%s':\n", l.name.c_str());
    int held = 0, not_here = 0;
    for (const auto& c : check.claims) {
        const char* status = c.status == ClaimStatus::held       ? "HOLDS"
                             : c.status == ClaimStatus::failed   ? "FAILS"
                             : c.status == ClaimStatus::not_here ? "NOT HERE"
                                                                 : "INVALID";
        std::printf("  %-8s %s\n", status, c.says.c_str());
        not_here += c.status == ClaimStatus::not_here;
        if (c.status == ClaimStatus::invalid || c.status == ClaimStatus::not_here) {
            std::printf("          %s\n", c.explanation.c_str());
            continue;
        }
        std::printf("          measured: %s = %s\n", c.measured.what.c_str(), c.measured.shown.c_str());
        std::printf("          expected: %s %s = %s\n", c.comparison.c_str(), c.expected.what.c_str(),
                    c.expected.shown.c_str());
        std::printf("          left against right: %s%s\n", c.difference.c_str(),
                    c.worst_rank >= 0
                        ? (c.status == ClaimStatus::held ? ", the rank closest to failing" : ", the worst rank")
                        : "");
        held += c.status == ClaimStatus::held;
    }
    std::printf(
        "%d of %zu claim(s) hold%s%s\n", held, check.claims.size(),
        not_here ? fmt::format(", {} not checked on this machine (what it needs does not hold here)", not_here).c_str()
                 : "",
        from_traces.empty() ? fmt::format("; runs took {:.1f} s", total_s).c_str() : "");
    if (check.invalid() && runs_ok) return 2;  // the lesson names a key or run the reports lack: its file is wrong
    return check.held() && runs_ok ? 0 : 1;
}

}  // namespace

int lesson_command(int argc, char** argv) {
    CLI::App cli{
        "ultrascope lesson: workshop lessons, each one idea of the Ultra-Scale Playbook on real ranks "
        "(docs/lessons.md)"};
    std::string name, dir, trace_dir = "runs", from_traces, train_binary;
    bool list = false, check = false, answer = false, verbose = false;
    cli.add_option("name", name, "The lesson (see --list)");
    cli.add_flag("--list", list, "List the lessons (and any file that does not load)");
    cli.add_flag("--check", check,
                 "Run the lesson's runs headless and check its claim: exit 0 holds, 1 does not, 2 bad input");
    cli.add_flag("--answer", answer, "Print the lesson's answer (lessons that ask the class to find something)");
    cli.add_option("--dir", dir, "Lessons directory (default: the repository's assets/lessons)");
    cli.add_option("--trace-dir", trace_dir, "Where --check writes the runs' traces (default runs/)");
    cli.add_option(
        "--from-traces", from_traces,
        "With --check: read DIR/lesson-NAME-LABEL.ustrace instead of running (a check re-done on earlier runs)");
    cli.add_option("--train-binary", train_binary, "The ultrascope-train to launch (default: next to this program)");
    cli.add_flag("-v,--verbose", verbose, "With --check: show the runs' progress and output");
    US_PARSE_FLAGS(cli, argc, argv, "lesson");

    const std::filesystem::path lessons_dir = dir.empty() ? lesson::default_lessons_dir() : std::filesystem::path(dir);
    const lesson::LessonSet set = lesson::load_lessons(lessons_dir);
    US_CHECK_INPUT(!set.lessons.empty() || !set.errors.empty(),
                   "no lesson file (*.json) in {}: give --dir the folder of the lessons (default assets/lessons)",
                   lessons_dir.string());
    if (list || name.empty()) {
        if (name.empty() && !list) std::printf("usage: ultrascope lesson --list | NAME [--check | --answer]\n\n");
        return list_lessons(set);
    }
    const lesson::Lesson* l = lesson::find_lesson(set, name);
    if (!l) {
        for (const auto& e : set.errors)
            if (std::filesystem::path(e.path).stem() == name) fail_user("{}", e.message);
        std::string known;
        for (const auto& x : set.lessons) known += (known.empty() ? "" : ", ") + x.name;
        fail_user("unknown lesson '{}': known lessons are {} (ultrascope lesson --list)", name, known);
    }
    if (answer) {
        US_CHECK_INPUT(!l->answer.empty(), "lesson '{}' has no answer to reveal", name);
        if (l->formula_gives_answer) std::printf("Formula: %s\n", l->formula.c_str());
        std::printf("%s\n", l->answer.c_str());
        return 0;
    }
    if (!check) {
        print_lesson(*l);
        return 0;
    }
    install_stop_signals();  // Ctrl-C stops the launched ranks properly
    return check_lesson(*l, trace_dir, from_traces, train_binary, verbose);
}

}  // namespace us::app
