// ultrascope: the desktop profiler and trainer. With no command it opens the GUI on a default live run (4 CPU
// ranks, dp 2 x pp 2, small preset: app/launch/default_run.h); with paths it opens them (a trace, PyTorch profiler
// files, a memory snapshot or a hung job's Flight Recorder dumps, each in its views: app/report/input_kind.h).
// Without a display it does the same headless: the run and its report, or the report of the paths. The commands
// (run, report, diff, export, predict, plan, calibrate, lesson, capture, agent, nodes) are listed by usage() below
// and dispatched by main(); each parses its own flags (app/cli). GUI options: app/gui/options/gui_args.h.
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <ios>
#include <new>
#include <cstring>
#include <string>
#include <vector>

#include "app/cli/capture_commands.h"
#include "app/cli/commands.h"
#include "app/launch/default_run.h"
#include "app/gui/options/gui_args.h"
#include "common/core/check.h"

#ifdef US_HAVE_GUI
#include "app/gui/platform/gui.h"
#endif

namespace {

void usage() {
    std::printf(
        "usage: ultrascope [TRACE...] [GUI options] [training flags]   the GUI (a default dp 2 x pp 2 run, or TRACE)\n"
        "       ultrascope <command> [args]\n"
        "commands:\n"
        "  run [-n RANKS] [ultrascope-train flags]   launch a run, watch it live, write its trace and report\n"
        "  report DUMPS... [--json]                  what holds a hung job: its ranks' Flight Recorder dumps\n"
        "                                            (docs/hangs.md)\n"
        "  report TRACE... [--json]                  step breakdown, overlap, bubbles, memory, MFU (also of\n"
        "                                            PyTorch profiler traces: files or a folder)\n"
        "  diff A B [--json]                         what made run B's step slower than A's, cause by cause\n"
        "  export TRACE --chrome OUT.json[.gz]       Chrome trace JSON for Perfetto and chrome://tracing\n"
        "  predict [model and parallel flags]        memory, FLOPs, communication and bubble predictions\n"
        "  plan [--model M] [--gpu G] --gpus N [...] which layout fits a model on a cluster, how fast (docs/planner.md)\n"
        "  calibrate [--out FILE]                    measure this machine (GEMMs, MPI, per-op costs) for plan --cluster\n"
        "  lesson --list | NAME [--check]            workshop lessons: run one idea on real ranks, check its claim\n"
        "  capture --steps N --out DIR [--agents ..] N steps of a running PyTorch job, every rank (KINETO_USE_DAEMON=1;\n"
        "                                            docs/attach-pytorch.md)\n"
        "  agent [--port P] [--listen ADDR]          a node's Kineto daemon, for capture --agents\n"
        "  nodes up N | exec K -- CMD | down         emulated nodes that stay up, for any job (docs/nodes.md)\n"
        "Each command takes --help.\n%s",
        us::app::gui_args_help().c_str());
}

int gui_or_fallback(int argc, char** argv) {
    const us::app::GuiArgs parsed = us::app::parse_gui_args(argc, argv);
    if (parsed.help_requested) {
        usage();
        return 0;
    }
    const us::gui::GuiOptions& o = parsed.options;
#ifdef US_HAVE_GUI
    // Without a display the screenshot mode draws offscreen (EGL); everything else runs headless.
    if (us::gui::display_available() || !o.screenshot.empty()) return us::gui::run_gui(o);
    std::fprintf(stderr, "ultrascope: no display (DISPLAY is not set): doing the same thing headless\n");
#else
    US_CHECK_INPUT(o.screenshot.empty(),
                   "this build has no GUI (libimgui-dev, libglfw3-dev were missing at build time)");
    std::fprintf(stderr, "ultrascope: this build has no GUI: doing the same thing headless\n");
#endif
    if (!o.lesson.empty()) {  // the lesson's runs and its checked claim, in text
        std::fprintf(stderr, "ultrascope lesson %s --check\n", o.lesson.c_str());
        std::string lesson = o.lesson;
        std::string check = "--check";
        std::vector<char*> args = {argv[0], lesson.data(), check.data()};
        return us::app::lesson_command(int(args.size()), args.data());
    }
    if (!o.open_trace.empty()) {
        std::vector<std::string> paths = o.open_trace;
        std::string shown;
        for (const auto& p : paths) shown += " " + p;
        std::fprintf(stderr, "ultrascope report%s\n", shown.c_str());
        std::vector<char*> args = {argv[0]};
        for (auto& p : paths) args.push_back(p.data());
        return us::app::report_command(int(args.size()), args.data());
    }
    if (!o.launch) {
        usage();
        return 2;
    }
    const us::app::DefaultRun run = us::app::default_run(o.run.ranks, o.train_args);
    std::vector<std::string> run_args = {"run", "-n", std::to_string(run.ranks)};
    run_args.insert(run_args.end(), run.args.begin(), run.args.end());
    std::string shown = "ultrascope";
    for (const auto& a : run_args) shown += " " + a;
    std::fprintf(stderr, "%s\n", shown.c_str());
    std::vector<char*> args;
    for (auto& a : run_args) args.push_back(a.data());
    return us::app::run_command(int(args.size()), args.data());
}

// The command's exit code, with everything it printed on stdout delivered: a full disk or a closed pipe there is an
// error, not a success with a cut report.
int with_output_checked(int code) {
    if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return code;
    std::fprintf(stderr, "ultrascope: error: cannot write the output (standard output): %s\n", std::strerror(errno));
    return code != 0 ? code : 1;
}

int dispatch(int argc, char** argv) {
    if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
        usage();
        return 0;
    }
    const std::string command = argc >= 2 ? argv[1] : "";
    if (command == "run") return us::app::run_command(argc - 1, argv + 1);
    if (command == "report") return us::app::report_command(argc - 1, argv + 1);
    if (command == "diff") return us::app::diff_command(argc - 1, argv + 1);
    if (command == "export") return us::app::export_command(argc - 1, argv + 1);
    if (command == "predict") return us::app::predict_command(argc - 1, argv + 1);
    if (command == "plan") return us::app::plan_command(argc - 1, argv + 1);
    if (command == "calibrate") return us::app::calibrate_command(argc - 1, argv + 1);
    if (command == "lesson") return us::app::lesson_command(argc - 1, argv + 1);
    if (command == "capture") return us::app::capture_command(argc - 1, argv + 1);
    if (command == "agent") return us::app::agent_command(argc - 1, argv + 1);
    if (command == "nodes") return us::app::nodes_command(argc - 1, argv + 1);
    if (command == "gui") return gui_or_fallback(argc - 1, argv + 1);
    return gui_or_fallback(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return with_output_checked(dispatch(argc, argv));
    } catch (const us::UserError& e) {
        std::fprintf(stderr, "ultrascope: error: %s\n", e.what());
        return 2;
    } catch (const std::filesystem::filesystem_error& e) {  // a path given that cannot be walked or written
        std::fprintf(stderr, "ultrascope: error: %s (check the path and its permissions)\n", e.what());
        return 2;
    } catch (const std::ios_base::failure& e) {
        std::fprintf(stderr, "ultrascope: error: cannot read or write a file: %s (check the paths given)\n", e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr,
                     "ultrascope: error: out of memory (a file that claims huge sizes, or too little memory)\n");
        return 1;
    }
}
