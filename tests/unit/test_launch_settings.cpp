// The launch panel's settings are a TrainConfig read and written by the trainer's own flag table: every flag
// survives the panel, a preset switch keeps what was edited, and a problem is named before anything launches.
#include <algorithm>

#include <catch2/catch.hpp>

#include "app/gui/model/launch_settings.h"
#include "common/settings/cli.h"
#include "test_util.h"

using namespace us;
using us::gui::LaunchSettings;

namespace {
TrainConfig parsed(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : args) argv.push_back(a.c_str());
    return parse_train_args(int(argv.size()), argv.data()).cmd.config;
}
}  // namespace

TEST_CASE("the launch panel keeps every flag it is given, shown or not", "[cpu][gui-model]") {
    const std::vector<std::string> args = {
        "--preset",     "tiny", "--dp",         "2",           "--pp",        "2",
        "--grad-accum", "4",    "--lr",         "0.002",       "--seed",      "7",
        "--warmup",     "3",    "--data",       "/tmp/x.txt",  "--recompute", "selective",
        "--precision",  "bf16", "--no-overlap", "--bucket-mb", "0.5",         "--fp32-grad-accum",
        "--attention",  "flash"};
    const LaunchSettings s = LaunchSettings::from_args(args);
    CHECK(s.ranks() == 4);
    CHECK(s.config.parallel.pp == 2);
    CHECK(s.config.precision == Precision::bf16);
    const auto written = s.train_args();
    REQUIRE(written.size() >= 2);
    CHECK(written[0] == "--preset");
    CHECK(written[1] == "tiny");
    CHECK(parsed(written).to_json() == parsed(args).to_json());
}

TEST_CASE("switching the preset keeps the settings edited away from the old one", "[cpu][gui-model]") {
    LaunchSettings s = LaunchSettings::from_args({"--preset", "small", "--dp", "4", "--layers", "3"});
    const TrainConfig tiny = gui::preset_config("tiny");
    REQUIRE(tiny.model.hidden != s.config.model.hidden);
    s.set_preset("tiny");
    CHECK(s.config.preset == "tiny");
    CHECK(s.config.parallel.dp == 4);                   // edited: kept
    CHECK(s.config.model.layers == 3);                  // edited: kept
    CHECK(s.config.model.hidden == tiny.model.hidden);  // not edited: the new preset's
    CHECK(s.config.batch == tiny.batch);
}

TEST_CASE("the panel names a problem before launching and launches what it checked", "[cpu][gui-model]") {
    LaunchSettings s = LaunchSettings::from_args({"--preset", "tiny", "--tp", "2"});
    CHECK(s.problem().empty());
    s.config.model.heads = 3;  // does not divide by tp 2
    const std::string why = s.problem();
    INFO(why);
    CHECK(why.find("heads") != std::string::npos);
    s.config.model.heads = 4;
    s.config.parallel.zero = 7;
    CHECK(s.problem().find("zero") != std::string::npos);
}

TEST_CASE("a recorded run's settings reproduce it in the panel", "[cpu][gui-model]") {
    TrainConfig run = parsed({"--preset", "tiny", "--layers", "3", "--dp", "2", "--zero", "2", "--seed", "9",
                              "--threads", "1", "--trace", "/tmp/run.ustrace"});
    const LaunchSettings s = LaunchSettings::from_config(run.to_json());
    // Where it ran (threads, its trace file) is the recording machine's, not the run's.
    run.threads = 0;
    run.trace.clear();
    CHECK(parsed(s.train_args()).to_json() == run.to_json());
    CHECK(s.train_args()[1] == "tiny");
    // An unknown preset (another installation's): the flags alone, over the defaults.
    nlohmann::json j = run.to_json();
    j["preset"] = "not-here";
    const LaunchSettings other = LaunchSettings::from_config(j);
    CHECK(other.config.preset.empty());
    CHECK(parsed(other.train_args()).model.layers == 3);
}

// Issue 32: after the pipeline lesson's AFAB run, setting pp 1 greyed the schedule out, yet Launch still passed
// --pp-schedule afab, and at pp 1 AFAB runs every forward first (8x the activations of plain accumulation).
TEST_CASE("a setting the panel greys out is not passed", "[cpu][gui-model]") {
    LaunchSettings s =
        LaunchSettings::from_args({"--preset", "tiny", "--pp", "2", "--grad-accum", "8", "--pp-schedule", "afab",
                                   "--tp", "2", "--sp", "--save", "/tmp/x.st", "--save-every", "5"});
    CHECK(gui::applicable(s.config).schedule);
    const auto has = [](const std::vector<std::string>& args, const std::string& flag) {
        return std::find(args.begin(), args.end(), flag) != args.end();
    };
    CHECK(has(s.train_args(), "--pp-schedule"));
    CHECK(has(s.train_args(), "--sp"));
    CHECK(has(s.train_args(), "--save-every"));
    s.config.parallel.pp = 1;  // what the lesson's settings became
    s.config.parallel.tp = 1;
    s.config.save.clear();
    const gui::Applicable a = gui::applicable(s.config);
    CHECK_FALSE(a.schedule);
    CHECK_FALSE(a.chunks);
    CHECK_FALSE(a.sp);
    CHECK_FALSE(a.save_every);
    const auto args = s.train_args();
    CHECK_FALSE(has(args, "--pp-schedule"));
    CHECK_FALSE(has(args, "--sp"));
    CHECK_FALSE(has(args, "--save-every"));
    CHECK(parsed(args).parallel.pp_schedule == PipelineSchedule::one_f_one_b);
    CHECK(s.problem().empty());  // --save-every without --save would be refused; greyed out, it is not passed
    CHECK(s.resolve().parallel.pp_schedule == PipelineSchedule::one_f_one_b);
    CHECK(s.config.parallel.pp_schedule ==
          PipelineSchedule::afab);  // the panel keeps the edit for when pp goes back up
    // the interleaved schedule's chunks are passed only with it
    s.config.parallel.pp = 2;
    s.config.parallel.pp_schedule = PipelineSchedule::interleaved;
    s.config.parallel.pp_chunks = 2;
    s.config.model.layers = 4;
    CHECK(parsed(s.train_args()).parallel.pp_chunks == 2);
    s.config.parallel.pp_schedule = PipelineSchedule::one_f_one_b;
    CHECK(parsed(s.train_args()).parallel.pp_chunks == 1);
}

TEST_CASE("a recorded run run again here: its settings, this panel's hosts, device, threads and progress mode",
          "[cpu][gui-model]") {
    const TrainConfig run = parsed({"--preset", "tiny", "--dp", "2", "--zero", "1", "--threads", "1"});
    LaunchSettings here = LaunchSettings::from_args({"--preset", "small", "--threads", "3"});
    here.config.device = "cuda";
    here.hosts.hostfile = "hosts.txt";
    const LaunchSettings again = here.rerun(run.to_json());
    CHECK(again.config.parallel.dp == 2);
    CHECK(again.config.parallel.zero == 1);
    CHECK(again.config.preset == "tiny");
    CHECK(again.config.threads == 3);
    CHECK(again.config.device == "cuda");
    CHECK(again.hosts.hostfile == "hosts.txt");
}
