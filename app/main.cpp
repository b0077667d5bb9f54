// ultrascope: the desktop profiler and trainer. With no command it opens the GUI on a default live run (4 CPU
// ranks, dp 2 x pp 2, small preset: app/cli/default_run.h); with a trace file it opens that. The headless commands:
//   ultrascope run [-n RANKS] [training flags]   launch a run, stream it live, write its trace, print the report
//   ultrascope report TRACE... [--json]           what a trace (or PyTorch profiler files) says, next to the predictions
//   ultrascope export TRACE --chrome OUT.json     for Perfetto / chrome://tracing
//   ultrascope predict [flags]                    the formulas for a configuration, without running it
//   ultrascope plan [flags]                       which layout fits a model on a cluster and how fast (docs/planner.md)
//   ultrascope calibrate [--out FILE]             measure this machine's costs for `plan --cluster FILE`
// GUI options: [TRACE | --open TRACE] [--listen [HOST:]PORT] [--no-launch] [-n RANKS] [--screenshot OUT.png
// [--view memory|timeline|overlap|training|compare|all]] [--exit-when-done] [training flags for the launch]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/default_run.h"
#include "app/lesson/lesson.h"
#include "common/core/check.h"
#include "profiler/trace/trace_store.h"

#ifdef US_HAVE_GUI
#include "app/gui/gui.h"
#endif

namespace {

void usage() {
    std::printf(
        "usage: ultrascope [TRACE] [GUI options] [training flags]   the GUI (a default dp 2 x pp 2 run, or TRACE)\n"
        "       ultrascope <command> [args]\n"
        "commands:\n"
        "  run [-n RANKS] [ultrascope-train flags]   launch a run, watch it live, write its trace and report\n"
        "  report TRACE... [--json]                  step breakdown, overlap, bubbles, memory, MFU (also of\n"
        "                                            PyTorch profiler traces: files or a folder)\n"
        "  export TRACE --chrome OUT.json[.gz]       Chrome trace JSON for Perfetto and chrome://tracing\n"
        "  predict [model and parallel flags]        memory, FLOPs, communication and bubble predictions\n"
        "  plan [--model M] [--gpu G] --gpus N [...] which layout fits a model on a cluster, how fast (docs/planner.md)\n"
        "  calibrate [--out FILE]                    measure this machine (GEMMs, MPI, per-op costs) for plan --cluster\n"
        "  lesson --list | NAME [--check]            workshop lessons: run one idea on real ranks, check its claim\n"
        "GUI options:\n"
        "  --open TRACE            open a trace instead of launching\n"
        "  --listen [HOST:]PORT    also listen for runs started elsewhere (attach)\n"
        "  --no-launch             start without launching a run\n"
        "  -n RANKS                ranks of the launched run (default: the layout's; dp 2 x pp 2 = 4)\n"
        "  --screenshot OUT.png    render, write OUT.png (and OUT.png.json with the views' regions), exit\n"
        "  --view V                with --screenshot: memory | timeline | overlap | training | compare | experts | ops | snapshot\n"
        "                          | planner | all\n"
        "  --fit-step N            show step N in the time window (timeline and memory views)\n"
        "  --font-size PX          UI font size, 8 to 64 (default 16 x the monitor's scale; View > font size)\n"
        "  --exit-when-done        exit when the launched run ends, with its exit code\n"
        "  --lesson NAME           open a workshop lesson and launch its first run (ultrascope lesson --list)\n"
        "  --lesson-runs all       with --lesson: launch every run of the lesson in turn (the comparison)\n"
        "  --high-contrast         the projector theme (also View > high contrast)\n"
        "  --plan MODEL            open the Planner on MODEL (--plan-cluster NAME|FILE, --plan-gpus N; File > New plan)\n"
        "  --plan-launch           with --plan: launch the best layout this machine can run, measured beside its prediction\n"
        "  --plan-show             with --plan: show the best fitting layout's predicted step in the views (marked predicted)\n"
        "  --store-cap-mib N       memory cap of the trace kept in memory (default 2048; the file keeps all)\n"
        "  --hostfile FILE         launch ranks on the hosts of an Open MPI hostfile (with --stream-listen)\n"
        "  --launcher L            mpirun (default) or srun (inside a Slurm allocation)\n"
        "  --stream-listen ADDR    the address launched ranks stream back to (default 127.0.0.1; multi-host:\n"
        "                          this machine's address on the hosts' network, or 0.0.0.0)\n"
        "Each command takes --help.\n");
}

// Whether argv[i] is the value of the flag before it (every flag takes a value but these switches).
bool follows_value_flag(char** argv, int i) {
    if (i <= 1) return false;
    const std::string prev = argv[i - 1];
    if (prev.rfind("-", 0) != 0) return false;
    for (const char* sw : {"--no-overlap", "--fp32-grad-accum", "--quiet", "--no-launch", "--exit-when-done", "--print-config", "--sp",
                           "--high-contrast", "--plan-launch", "--plan-show"})
        if (prev == sw) return false;
    return true;
}

int gui_or_fallback(int argc, char** argv) {
    std::string open, screenshot, view = "all", listen;
    bool launch = true, exit_when_done = false;
    int ranks = 0;  // not given
    int fit_step = 0;
    float font_px = 0;  // automatic
    size_t store_cap_bytes = us::prof::TraceStoreOptions{}.max_bytes;
    std::string hostfile, launcher = "mpirun", stream_listen = "127.0.0.1";
    std::string lesson, lesson_runs = "first";
    std::string plan_model, plan_cluster = "h100-sxm";
    int plan_gpus = 64;
    bool plan_launch = false, plan_show = false;
    bool high_contrast = false;
    std::vector<std::string> train_args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            US_CHECK_INPUT(i + 1 < argc, "{} needs a value", a);
            return argv[++i];
        };
        if (a == "--open") open = value();
        else if (a == "--screenshot") screenshot = value();
        else if (a == "--view") view = value();
        else if (a == "--fit-step") fit_step = std::atoi(value().c_str());
        else if (a == "--listen") listen = value();
        else if (a == "--no-launch") launch = false;
        else if (a == "--exit-when-done") exit_when_done = true;
        else if (a == "-n" || a == "--ranks") ranks = std::atoi(value().c_str());
        else if (a == "--store-cap-mib") store_cap_bytes = us::app::parse_store_cap_mib(value());
        else if (a == "--font-size") {
            const std::string v = value();
            char* end = nullptr;
            font_px = std::strtof(v.c_str(), &end);
            US_CHECK_INPUT(!v.empty() && *end == '\0' && font_px >= 8 && font_px <= 64,
                           "--font-size '{}': expected pixels from 8 to 64 (e.g. 32 for a 4K projector)", v);
        }
        else if (a == "--hostfile") hostfile = value();
        else if (a == "--launcher") launcher = value();
        else if (a == "--stream-listen") stream_listen = value();
        else if (a == "--lesson") lesson = value();
        else if (a == "--lesson-runs") lesson_runs = value();
        else if (a == "--high-contrast") high_contrast = true;
        else if (a == "--plan") plan_model = value();
        else if (a == "--plan-cluster") plan_cluster = value();
        else if (a == "--plan-gpus") plan_gpus = std::atoi(value().c_str());
        else if (a == "--plan-launch") plan_launch = true;
        else if (a == "--plan-show") plan_show = true;
        else if (a.rfind("-", 0) != 0 && !follows_value_flag(argv, i) && std::filesystem::exists(a))
            open += (open.empty() ? "" : "\n") + a;  // `ultrascope PATH [PATH...]`: one per line (data_source.h)
        else train_args.push_back(a);
    }
    US_CHECK_INPUT(view == "all" || view == "memory" || view == "timeline" || view == "overlap" || view == "training" ||
                       view == "compare" || view == "experts" || view == "ops" || view == "planner" || view == "snapshot",
                   "unknown --view '{}': expected memory, timeline, overlap, training, compare, experts, ops, planner, snapshot or "
                   "all", view);
    US_CHECK_INPUT(plan_gpus >= 1 && plan_gpus <= 16384, "--plan-gpus {}: expected 1 to 16384 GPUs", plan_gpus);
    US_CHECK_INPUT(lesson_runs == "first" || lesson_runs == "all", "--lesson-runs '{}': expected first or all", lesson_runs);
    if (!lesson.empty()) {  // named now, before a window opens: a typo gets the list of lessons
        const auto set = us::lesson::load_lessons(us::lesson::default_lessons_dir());
        US_CHECK_INPUT(us::lesson::find_lesson(set, lesson), "no lesson '{}': see ultrascope lesson --list", lesson);
    }
#ifdef US_HAVE_GUI
    if (us::gui::display_available()) {
        us::gui::GuiOptions o;
        o.open_trace = open;
        o.launch = launch;
        o.ranks = ranks;
        o.train_args = train_args;
        o.listen = listen;
        o.screenshot = screenshot;
        o.view = view;
        o.fit_step = fit_step;
        o.font_px = font_px;
        o.exit_when_done = exit_when_done;
        o.store_cap_bytes = store_cap_bytes;
        o.hostfile = hostfile;
        o.launcher = launcher;
        o.stream_listen = stream_listen;
        o.lesson = lesson;
        o.lesson_all_runs = lesson_runs == "all";
        o.high_contrast = high_contrast;
        o.plan_model = plan_model;
        o.plan_cluster = plan_cluster;
        o.plan_gpus = plan_gpus;
        o.plan_launch = plan_launch;
        o.plan_show = plan_show;
        return us::gui::run_gui(o);
    }
    US_CHECK_INPUT(screenshot.empty(), "--screenshot needs a display: run under xvfb-run (apt-get install xvfb)");
    std::fprintf(stderr, "ultrascope: no display (DISPLAY is not set): doing the same thing headless\n");
#else
    US_CHECK_INPUT(screenshot.empty(), "this build has no GUI (libimgui-dev, libglfw3-dev were missing at build time)");
    std::fprintf(stderr, "ultrascope: this build has no GUI: doing the same thing headless\n");
#endif
    if (!lesson.empty()) {  // the lesson's runs and its checked claim, in text
        std::fprintf(stderr, "ultrascope lesson %s --check\n", lesson.c_str());
        std::string check = "--check";
        std::vector<char*> args = {argv[0], lesson.data(), check.data()};
        return us::app::lesson_command(int(args.size()), args.data());
    }
    if (!open.empty()) {
        std::vector<std::string> paths;
        for (size_t at = 0; at <= open.size();) {
            const size_t nl = std::min(open.find('\n', at), open.size());
            paths.push_back(open.substr(at, nl - at));
            at = nl + 1;
        }
        std::string shown;
        for (const auto& p : paths) shown += " " + p;
        std::fprintf(stderr, "ultrascope report%s\n", shown.c_str());
        std::vector<char*> args = {argv[0]};
        for (auto& p : paths) args.push_back(p.data());
        return us::app::report_command(int(args.size()), args.data());
    }
    if (!launch) {
        usage();
        return 2;
    }
    const us::app::DefaultRun run = us::app::default_run(ranks, train_args);
    std::vector<std::string> run_args = {"run", "-n", std::to_string(run.ranks)};
    run_args.insert(run_args.end(), run.args.begin(), run.args.end());
    std::string shown = "ultrascope";
    for (const auto& a : run_args) shown += " " + a;
    std::fprintf(stderr, "%s\n", shown.c_str());
    std::vector<char*> args;
    for (auto& a : run_args) args.push_back(a.data());
    return us::app::run_command(int(args.size()), args.data());
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
            usage();
            return 0;
        }
        const std::string command = argc >= 2 ? argv[1] : "";
        if (command == "run") return us::app::run_command(argc - 1, argv + 1);
        if (command == "report") return us::app::report_command(argc - 1, argv + 1);
        if (command == "export") return us::app::export_command(argc - 1, argv + 1);
        if (command == "predict") return us::app::predict_command(argc - 1, argv + 1);
        if (command == "plan") return us::app::plan_command(argc - 1, argv + 1);
        if (command == "calibrate") return us::app::calibrate_command(argc - 1, argv + 1);
        if (command == "lesson") return us::app::lesson_command(argc - 1, argv + 1);
        if (command == "gui") return gui_or_fallback(argc - 1, argv + 1);
        return gui_or_fallback(argc, argv);
    } catch (const us::UserError& e) {
        std::fprintf(stderr, "ultrascope: error: %s\n", e.what());
        return 2;
    }
}
