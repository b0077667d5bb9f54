// The GUI's command line (app/gui/options/gui_args.h): which arguments are the GUI's options, which are traces to open
// and which pass through, in order, to the launched run; the trainer's switches and value flags as its own table says.
#include <CLI/CLI.hpp>

#include "app/gui/options/gui_args.h"
#include "app/gui/model/view_table.h"
#include "common/core/check.h"
#include "common/settings/cli.h"
#include "test_util.h"

using us::app::parse_gui_args;
using Args = std::vector<std::string>;
using us::test::temp_path;

namespace {

us::app::GuiArgs parse(Args args) {
    args.insert(args.begin(), "ultrascope");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return parse_gui_args(int(argv.size()), argv.data());
}

std::string error_of(const Args& args) {
    try {
        parse(args);
    } catch (const us::UserError& e) {
        return e.what();
    }
    return "";
}

// An existing folder, to stand for a trace on the command line.
std::string existing_dir(const std::string& name) {
    const std::string dir = temp_path(name);
    std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace

TEST_CASE("the GUI's own options fill its options and its defaults are the GUI's", "[cpu][app][gui-args]") {
    const auto none = parse({});
    CHECK(none.options.launch);
    CHECK(none.options.view == "all");
    CHECK(none.options.run.ranks == 0);
    CHECK(none.options.train_args.empty());
    CHECK(none.options.open_trace.empty());
    CHECK(none.options.store_cap_bytes == size_t(2048) << 20);
    CHECK(none.options.run.hosts.launcher == "mpirun");
    CHECK(none.options.run.hosts.stream_listen == "127.0.0.1");
    CHECK(none.options.plan_cluster == "h100-sxm");
    CHECK(none.options.plan_gpus == 64);

    const auto o = parse({"--no-launch",
                          "-n",
                          "3",
                          "--screenshot",
                          "out.png",
                          "--view",
                          "memory",
                          "--fit-step",
                          "4",
                          "--font-size",
                          "32",
                          "--exit-when-done",
                          "--listen",
                          "127.0.0.1:7000",
                          "--store-cap-mib",
                          "64",
                          "--hostfile",
                          "hosts",
                          "--launcher",
                          "srun",
                          "--stream-listen",
                          "0.0.0.0",
                          "--high-contrast",
                          "--plan",
                          "gpt3-175b",
                          "--plan-cluster",
                          "a100",
                          "--plan-gpus",
                          "8",
                          "--plan-launch",
                          "--plan-show",
                          "--open",
                          "trace.ustrace"})
                       .options;
    CHECK_FALSE(o.launch);
    CHECK(o.run.ranks == 3);
    CHECK(o.screenshot == "out.png");
    CHECK(o.view == "memory");
    CHECK(o.fit_step == 4);
    CHECK(o.font_px == 32.0f);
    CHECK(o.exit_when_done);
    CHECK(o.listen == "127.0.0.1:7000");
    CHECK(o.store_cap_bytes == size_t(64) << 20);
    CHECK(o.run.hosts.hostfile == "hosts");
    CHECK(o.run.hosts.launcher == "srun");
    CHECK(o.run.hosts.stream_listen == "0.0.0.0");
    CHECK(o.high_contrast);
    CHECK(o.plan_model == "gpt3-175b");
    CHECK(o.plan_cluster == "a100");
    CHECK(o.plan_gpus == 8);
    CHECK(o.plan_launch);
    CHECK(o.plan_show);
    CHECK(o.open_trace == Args{"trace.ustrace"});
    CHECK(o.train_args.empty());  // nothing of the GUI's reaches the trainer
    CHECK(parse({"--ranks", "5"}).options.run.ranks == 5);
    CHECK(parse({"--view=timeline"}).options.view == "timeline");
    CHECK(parse({"--view", "ops", "--view", "overlap"}).options.view == "overlap");  // a repeated option: the last
}

TEST_CASE("training flags pass through to the launched run in their order, among the GUI's options",
          "[cpu][app][gui-args]") {
    const auto o = parse({"--dp", "2", "--no-launch", "--lr", "0.001", "--sp", "-n", "4", "--tp", "2", "--quiet",
                          "--steps", "5", "--no-such-flag"})
                       .options;
    CHECK(o.train_args ==
          Args{"--dp", "2", "--lr", "0.001", "--sp", "--tp", "2", "--quiet", "--steps", "5", "--no-such-flag"});
    CHECK_FALSE(o.launch);
    CHECK(o.run.ranks == 4);
}

TEST_CASE("an existing path opens as a trace unless it is a training flag's value", "[cpu][app][gui-args]") {
    const std::string a = existing_dir("gui-args-a"), b = existing_dir("gui-args-b");
    const auto two = parse({a, "--view", "memory", b}).options;
    CHECK(two.open_trace == Args{a, b});
    CHECK(two.train_args.empty());

    const auto data = parse({"--data", a, "--steps", "3", b}).options;  // --data's value is the trainer's
    CHECK(data.train_args == Args{"--data", a, "--steps", "3"});
    CHECK(data.open_trace == Args{b});

    CHECK(parse({"--data=" + a, b}).options.open_trace == Args{b});   // the value written into the flag
    CHECK(parse({"--no-overlap", a}).options.open_trace == Args{a});  // a switch takes no value
    CHECK(parse({"--no-launch", a}).options.open_trace == Args{a});
    CHECK(parse({"--no-such-flag", a}).options.train_args == Args{"--no-such-flag", a});  // the trainer refuses it

    // a path that names nothing is said as such (the trainer, which takes no argument of its own, called it "not
    // expected"); as a flag's value it is the trainer's to read
    const std::string missing = temp_path("gui-args-no-such-file");
    CHECK_THAT(error_of({missing}), Catch::Matchers::Contains("'" + missing + "': no such file or folder"));
    CHECK(parse({"--data", missing}).options.train_args == Args{"--data", missing});
}

TEST_CASE("a pattern that matches files opens them, as a hung job's dumps are given, kept as written",
          "[cpu][app][gui-args]") {
    const std::string dir = existing_dir("gui-args-dumps");
    us::test::write_file(dir + "/comm_lib_trace_rank_0", "x");
    us::test::write_file(dir + "/comm_lib_trace_rank_1", "x");
    const std::string pattern = dir + "/comm_lib_trace_rank_*";
    const auto o = parse({pattern}).options;
    CHECK(o.open_trace == Args{pattern});  // the opener expands it (hang::find_dump_files)
    CHECK(o.train_args.empty());
    const std::string none = dir + "/nothing_*";
    CHECK_THAT(error_of({none}), Catch::Matchers::Contains("no such file or folder"));  // matches nothing: said so
    CHECK(parse({"--data", pattern}).options.train_args == Args{"--data", pattern});    // a flag's value stays one
}

TEST_CASE("which training flags take a value is the trainer's own table's answer", "[cpu][app][gui-args]") {
    const std::string dir = existing_dir("gui-args-arity");
    int switches = 0, values = 0;
    for (const std::string& flag : us::train_flag_names()) {
        // the trainer's parser alone says whether the flag needs a value
        CLI::App trainer;
        us::add_train_flags(trainer);
        bool needs_value = false;
        try {
            trainer.parse(Args{flag});  // CLI11 takes the arguments reversed; one is one
        } catch (const CLI::ParseError&) {
            needs_value = true;
        }
        INFO(flag);
        const auto o = parse({flag, dir}).options;
        if (needs_value) {
            ++values;
            CHECK(o.train_args == Args{flag, dir});
            CHECK(o.open_trace.empty());
        } else {
            ++switches;
            CHECK(o.train_args == Args{flag});
            CHECK(o.open_trace == Args{dir});
        }
    }
    CHECK(switches >= 4);  // --fp32-grad-accum, --quiet, --sp, --no-overlap at least
    CHECK(values >= 40);
}

TEST_CASE("bad GUI options are refused with what was expected", "[cpu][app][gui-args]") {
    CHECK_THAT(error_of({"--view", "bogus"}),
               Catch::Matchers::Contains("unknown --view 'bogus': expected memory, timeline"));
    CHECK_THAT(error_of({"--font-size", "200"}),
               Catch::Matchers::Contains("--font-size '200': expected pixels from 8 to 64"));
    CHECK_THAT(error_of({"--font-size", "big"}), Catch::Matchers::Contains("--font-size 'big'"));
    CHECK_THAT(error_of({"--lesson-runs", "some"}),
               Catch::Matchers::Contains("--lesson-runs 'some': expected first or all"));
    CHECK_THAT(error_of({"--plan-gpus", "0"}), Catch::Matchers::Contains("--plan-gpus 0: expected 1 to 16384"));
    CHECK_THAT(error_of({"--store-cap-mib", "0"}), Catch::Matchers::Contains("--store-cap-mib '0'"));
    CHECK_THAT(error_of({"--lesson", "no-such-lesson"}), Catch::Matchers::Contains("no lesson 'no-such-lesson'"));
    CHECK_THAT(error_of({"-n", "four"}), Catch::Matchers::Contains("four"));
    CHECK_THAT(error_of({"--screenshot"}), Catch::Matchers::Contains("--screenshot"));  // a value is missing
}

TEST_CASE("the GUI takes every view of the table and all for --view, and its help lists every option",
          "[cpu][app][gui-args]") {
    for (const us::gui::ViewName& v : us::gui::kViewNames) CHECK(parse({"--view", v.id}).options.view == v.id);
    CHECK(parse({"--view", "all"}).options.view == "all");
    CHECK(parse({"--help"}).help_requested);
    CHECK(parse({"trace.ustrace", "-h"}).help_requested);
    const std::string help = us::app::gui_args_help();
    for (const char* option :
         {"--open",     "--listen",       "--no-launch",      "--ranks",       "--screenshot",  "--view",
          "--fit-step", "--font-size",    "--exit-when-done", "--lesson",      "--lesson-runs", "--high-contrast",
          "--plan",     "--plan-cluster", "--plan-gpus",      "--plan-launch", "--plan-show",   "--store-cap-mib",
          "--hostfile", "--launcher",     "--stream-listen"})
        CHECK_THAT(help, Catch::Matchers::Contains(option));
    for (const us::gui::ViewName& v : us::gui::kViewNames) CHECK_THAT(help, Catch::Matchers::Contains(v.id));
}
