// Parsing the GUI's command line (gui_args.h).
#include "app/gui/options/gui_args.h"

#include <CLI/CLI.hpp>

#include <glob.h>

#include <filesystem>
#include <set>

#include "app/gui/model/view_table.h"
#include "app/launch/launch_options.h"
#include "app/launch/live_run.h"
#include "app/lesson/lesson.h"
#include "common/core/check.h"
#include "common/settings/cli.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

namespace {

// The GUI's options, bound to `o` and to the texts checked after parsing.
struct GuiFlags {
    std::string store_cap_mib, font_size, lesson_runs = "first", open;
    bool no_launch = false;
};

void declare_gui_options(CLI::App& app, gui::GuiOptions& o, GuiFlags& f) {
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated option: last wins
    app.add_option("--open", f.open, "Open a trace instead of launching")->type_name("TRACE");
    app.add_option("--listen", o.listen, "Also listen for runs started elsewhere (attach)")->type_name("[HOST:]PORT");
    app.add_flag("--no-launch", f.no_launch, "Start without launching a run");
    add_launch_flags(app, o.run, LaunchCommand::gui);  // -n, --hostfile, --launcher, --stream-listen, --nodes ...
    app.add_option("--screenshot", o.screenshot,
                   "Render, write OUT.png (and OUT.png.json with the views' regions), exit")
        ->type_name("OUT.png");
    app.add_option("--view", o.view, "With --screenshot: one view alone (" + gui::view_name_list() + ")")
        ->type_name("V");
    app.add_option("--fit-step", o.fit_step, "Show step N in the time window (timeline and memory views)")
        ->type_name("N");
    app.add_option("--font-size", f.font_size,
                   "UI font size, 8 to 64 (default 16 x the monitor's scale; View > font size)")
        ->type_name("PX");
    app.add_flag("--exit-when-done", o.exit_when_done, "Exit when the launched run ends, with its exit code");
    app.add_option("--lesson", o.lesson, "Open a workshop lesson and launch its first run (ultrascope lesson --list)")
        ->type_name("NAME");
    app.add_option("--lesson-runs", f.lesson_runs,
                   "With --lesson: all launches every run of the lesson in turn (the "
                   "comparison); first (default) only the first")
        ->type_name("first|all");
    app.add_flag("--high-contrast", o.high_contrast, "The projector theme (also View > high contrast)");
    app.add_option("--plan", o.plan_model, "Open the Planner on MODEL (File > New plan)")->type_name("MODEL");
    app.add_option("--plan-cluster", o.plan_cluster, "With --plan: the cluster, a name or a file (default h100-sxm)")
        ->type_name("NAME|FILE");
    app.add_option("--plan-gpus", o.plan_gpus, "With --plan: the GPUs, 1 to 16384 (default 64)")->type_name("N");
    app.add_flag("--plan-launch", o.plan_launch,
                 "With --plan: launch the best layout this machine can run, measured "
                 "beside its prediction");
    app.add_flag("--plan-show", o.plan_show,
                 "With --plan: show the best fitting layout's predicted step in the views "
                 "(marked predicted)");
    app.add_flag("--attach-job", o.attach_job,
                 "Open File > Attach to a PyTorch job (started with KINETO_USE_DAEMON=1) instead of launching a run");
    app.add_option("--attach-agents", o.attach_agents, "With --attach-job: the agents to ask (default: this node)")
        ->type_name("HOST:PORT,...");
    app.add_option("--attach-token", o.attach_token, "With --attach-job: the agents' token")->type_name("TOKEN");
    app.add_option("--capture-steps", o.capture_steps,
                   "With --attach-job: capture N steps of the only job at once, and open them as a run")
        ->type_name("N");
    app.add_option("--capture-count", o.capture_count,
                   "With --capture-steps: capture K times in a row, each a run of its own (the Compare tab)")
        ->type_name("K");
    app.add_option("--capture-timeout", o.capture_timeout_s,
                   "With --attach-job: seconds a capture waits for the ranks and their files (default 120)")
        ->type_name("S");
    app::add_report_flags(app, o.report, app::ReportFlags::gui);  // as `ultrascope report` takes them
    app.add_option("--store-cap-mib", f.store_cap_mib,
                   "Memory cap of the trace kept in memory (default 2048; the file "
                   "keeps all)")
        ->type_name("N");
    app.footer(
        "Any other argument: a trace to open (a .ustrace file, PyTorch profiler files or their folder, a memory "
        "snapshot, a hung job's Flight Recorder dumps: files, a folder or a glob) if it exists, else a flag of the "
        "launched run (ultrascope-train --help).");
}

// The trainer's switches (its flags that take no value), from its own flag table.
std::set<std::string> train_switches() {
    CLI::App app;
    add_train_flags(app);
    std::set<std::string> switches;
    for (const CLI::Option* opt : app.get_options()) {
        if (opt->get_items_expected_max() != 0) continue;  // a switch expects no value
        for (const std::string& n : opt->get_lnames()) switches.insert("--" + n);
        for (const std::string& n : opt->get_snames()) switches.insert("-" + n);
    }
    return switches;
}

// Whether `arg`, following `prev` among the arguments the GUI does not take, is prev's value: prev is a flag that is
// neither one of the trainer's switches nor written with its value (--flag=VALUE). A flag the trainer does not know
// is taken to have a value (the trainer refuses it anyway).
bool is_value_of(const std::string& prev, const std::set<std::string>& switches) {
    return prev.rfind("-", 0) == 0 && prev.find('=') == std::string::npos && !switches.count(prev);
}

// Whether `arg` is a path to open: an existing file or folder, or a pattern (*, ?, [..]) that matches some, as a
// hung job's dumps are given ('dumps/rank_*', quoted so that thousands of names do not overflow the command line).
bool names_paths(const std::string& arg) {
    if (std::filesystem::exists(arg)) return true;
    if (arg.find_first_of("*?[") == std::string::npos) return false;
    glob_t g{};
    const bool matched = ::glob(arg.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0;
    ::globfree(&g);
    return matched;
}

}  // namespace

GuiArgs parse_gui_args(int argc, const char* const* argv) {
    GuiArgs out;
    gui::GuiOptions& o = out.options;
    o.store_cap_bytes = prof::TraceStoreOptions{}.max_bytes;
    GuiFlags f;
    CLI::App app{"ultrascope: the GUI", "ultrascope"};
    declare_gui_options(app, o, f);
    app.allow_extras();  // traces and training flags, sorted out below
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        out.help_requested = true;
        return out;
    } catch (const CLI::ParseError& e) {
        fail_user("{} (see ultrascope --help)", e.what());
    }
    o.launch = !f.no_launch && !o.attach_job;
    US_CHECK_INPUT(o.capture_steps >= 0 && o.capture_steps <= 1000, "--capture-steps must be from 1 to 1000");
    US_CHECK_INPUT(o.capture_count >= 1 && o.capture_count <= 100, "--capture-count must be from 1 to 100");
    US_CHECK_INPUT(o.capture_timeout_s > 0, "--capture-timeout must be positive");
    US_CHECK_INPUT((o.capture_steps == 0 && o.attach_agents.empty() && o.attach_token.empty()) || o.attach_job,
                   "--capture-steps, --attach-agents and --attach-token go with --attach-job");
    check_launch_flags(app, o.run);  // the launch panel's values: the rest of their rules is checked at the launch
    if (app.count("--store-cap-mib")) o.store_cap_bytes = parse_store_cap_mib(f.store_cap_mib);
    if (app.count("--font-size")) {
        char* end = nullptr;
        o.font_px = std::strtof(f.font_size.c_str(), &end);
        US_CHECK_INPUT(!f.font_size.empty() && *end == '\0' && o.font_px >= 8 && o.font_px <= 64,
                       "--font-size '{}': expected pixels from 8 to 64 (e.g. 32 for a 4K projector)", f.font_size);
    }
    // The rest, in order: a path that exists (or a pattern matching some) is a trace, snapshot or dumps to open
    // (`ultrascope PATH [PATH...]`, after --open's), unless it is a training flag's value; everything else goes to
    // the launched run.
    if (!f.open.empty()) o.open_trace.push_back(f.open);
    const std::set<std::string> switches = train_switches();
    const std::vector<std::string> rest = app.remaining();
    for (size_t i = 0; i < rest.size(); ++i) {
        const std::string& a = rest[i];
        const bool value = i > 0 && is_value_of(rest[i - 1], switches);
        const bool flag = a.rfind("-", 0) == 0;
        // The trainer takes no argument of its own: a word that is neither a flag nor a flag's value is a path to
        // open, and one that names nothing is said as such (the trainer called it "not expected").
        US_CHECK_INPUT(flag || value || names_paths(a),
                       "'{}': no such file or folder (ultrascope opens a trace, PyTorch profiler files, a memory "
                       "snapshot or a hung job's Flight Recorder dumps; training flags start with --)",
                       a);
        if (!flag && !value)
            o.open_trace.push_back(a);
        else
            o.train_args.push_back(a);
    }
    US_CHECK_INPUT(o.view == gui::kAllViews || gui::find_view_name(o.view), "unknown --view '{}': expected {}", o.view,
                   gui::view_name_list());
    if (!o.screenshot.empty()) {  // refused now, not after the frames were drawn
        const std::filesystem::path folder = std::filesystem::path(o.screenshot).parent_path();
        US_CHECK_INPUT(folder.empty() || std::filesystem::is_directory(folder),
                       "--screenshot '{}': no folder '{}': make it first, or give another path", o.screenshot,
                       folder.string());
    }
    US_CHECK_INPUT(o.plan_gpus >= 1 && o.plan_gpus <= 16384, "--plan-gpus {}: expected 1 to 16384 GPUs", o.plan_gpus);
    US_CHECK_INPUT(f.lesson_runs == "first" || f.lesson_runs == "all", "--lesson-runs '{}': expected first or all",
                   f.lesson_runs);
    o.lesson_all_runs = f.lesson_runs == "all";
    if (!o.lesson.empty()) {  // named now, before a window opens: a typo gets the list of lessons
        const auto set = lesson::load_lessons(lesson::default_lessons_dir());
        US_CHECK_INPUT(lesson::find_lesson(set, o.lesson), "no lesson '{}': see ultrascope lesson --list", o.lesson);
    }
    return out;
}

std::string gui_args_help() {
    // the options and the footer only: `ultrascope --help` writes the usage lines itself
    struct OptionsOnly : CLI::Formatter {
        std::string make_usage(const CLI::App*, std::string) const override { return ""; }
    };
    gui::GuiOptions o;
    GuiFlags f;
    CLI::App app{"", "ultrascope"};
    declare_gui_options(app, o, f);
    auto formatter = std::make_shared<OptionsOnly>();
    formatter->column_width(28);
    formatter->label("Options", "GUI options");
    app.formatter(formatter);
    return app.help();
}

}  // namespace us::app
