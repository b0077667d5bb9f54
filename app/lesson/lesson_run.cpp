// Running a lesson's run headless: the same machinery as `ultrascope run` (LiveRun: mpirun, the live stream, the
// trace file), waited for, then the same report `ultrascope report --json` prints. Progress goes to a callback;
// the launched ranks are stopped when asked to (or on SIGINT/SIGTERM once the caller installed the stop signals).
#include <fmt/format.h>

#include <thread>

#include "app/launch/live_run.h"
#include "app/launch/process_guard.h"
#include "app/lesson/lesson.h"
#include "app/report/run_report.h"
#include "common/core/check.h"
#include "profiler/analysis/report.h"

namespace us::lesson {
namespace fs = std::filesystem;

std::vector<std::string> run_arguments(const LessonRun& run) {
    std::vector<std::string> args = {"-n", std::to_string(run.ranks)};
    if (run.nodes.count > 0) {
        args.insert(args.end(), {"--nodes", std::to_string(run.nodes.count), "--node-placement", run.nodes.placement});
        if (run.nodes.inter_node_gbps > 0)
            args.insert(args.end(), {"--inter-node-gbps", fmt::format("{:g}", run.nodes.inter_node_gbps)});
    }
    args.insert(args.end(), run.args.begin(), run.args.end());
    return args;
}

std::string run_command_text(const LessonRun& run) {
    std::string s = "ultrascope run";
    for (const auto& a : run_arguments(run)) s += " " + a;
    return s;
}

RunResult run_lesson_run(const Lesson& lesson, const LessonRun& run, const RunOptions& options) {
    RunResult result;
    result.label = run.label;
    result.command = run_command_text(run);
    auto say = [&](const std::string& line) {
        if (options.on_message) options.on_message(line);
    };

    app::LiveRunOptions live;
    live.launch.ranks = run.ranks;
    live.launch.hosts.nodes = run.nodes;
    live.train_args = run.args;
    live.train_binary = options.train_binary;
    std::error_code ec;
    fs::create_directories(options.trace_dir, ec);
    US_CHECK_INPUT(!ec, "cannot create the trace directory {}: {}", options.trace_dir.string(), ec.message());
    live.trace_path = (options.trace_dir / fmt::format("lesson-{}-{}.ustrace", lesson.name, run.label)).string();
    result.trace_path = live.trace_path;

    app::LiveRun live_run(live);
    say(fmt::format("{}: {} (trace {})", run.label, result.command, result.trace_path));
    int last_step = 0;
    bool stopping = false;
    while (!live_run.finished()) {
        live_run.pump();
        for (const auto& m : live_run.take_messages()) say(run.label + ": " + m);
        const bool asked = (options.stop && options.stop->load()) || app::stop_signal() != 0;
        if (asked && !stopping) {
            say(run.label + ": stopping the run");
            live_run.stop();
            stopping = true;
        }
        if (const auto loss = live_run.store().latest_counter("loss"); loss && loss->second.step != last_step) {
            last_step = loss->second.step;
            say(fmt::format("{}: step {} loss {:.4f} ({:.1f} s)", run.label, last_step, loss->second.value,
                            live_run.seconds()));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    live_run.pump();
    for (const auto& m : live_run.take_messages()) say(run.label + ": " + m);
    result.seconds = live_run.seconds();
    result.exit_code = stopping ? std::max(1, live_run.result_code()) : live_run.result_code();
    if (stopping) result.problems.push_back("stopped before it finished");
    if (run.hangs && !stopping) {  // its hang ending is what it is for; its exit code and ended ranks say nothing
        result.exit_code = live_run.hung() ? 0 : std::max(1, result.exit_code);
        if (!live_run.hung())
            result.problems.push_back("it was meant to hang at its injected fault, and did not: " +
                                      (live_run.exit_code()
                                           ? fmt::format("it exited with code {}", *live_run.exit_code())
                                           : std::string("it finished")));
    } else {
        if (live_run.exit_code() && *live_run.exit_code() != 0)
            result.problems.push_back(fmt::format("the run exited with code {}", *live_run.exit_code()));
        for (const auto& lost : live_run.lost_ranks()) result.problems.push_back("lost: " + lost);
    }
    if (live_run.store().rank_count() > 0)
        result.report = app::run_report_json(
            app::make_run_report(app::ReportSource::of_store(live_run.store(), live_run.trace_path()), {}));
    else
        result.problems.push_back("no rank connected: the run produced no trace");
    return result;
}

std::vector<const Highlight*> highlights_of_run(const Lesson& lesson, const std::string& run_label) {
    std::vector<const Highlight*> out;
    if (run_label.empty()) return out;
    for (const Highlight& h : lesson.highlights)
        if (h.run.empty() || h.run == run_label) out.push_back(&h);
    return out;
}

}  // namespace us::lesson
