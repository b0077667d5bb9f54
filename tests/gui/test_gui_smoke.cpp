// GUI smoke tests, run under Xvfb (ctest starts this binary through xvfb-run): the GUI launches a live run through
// its own code path, draws it, and writes a screenshot; every view's region of the image must hold drawn content.
// Errors (a corrupt trace, a missing mpirun, a rank that dies) must show in the window and end with a non-zero
// exit code, never a hang or a crash.
#include <stb/stb_image.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../bench/kineto_synth.h"
#include "../unit/kineto_synthetic.h"
#include "../unit/test_util.h"
#include "app/gui/model/view_table.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

struct Image {
    int w = 0, h = 0;
    std::vector<unsigned char> rgb;
};

Image load_png(const std::string& path) {
    Image img;
    int n = 0;
    unsigned char* data = stbi_load(path.c_str(), &img.w, &img.h, &n, 3);
    REQUIRE(data != nullptr);
    img.rgb.assign(data, data + size_t(img.w) * size_t(img.h) * 3);
    stbi_image_free(data);
    return img;
}

// A region "holds drawn content" when a good share of its pixels differ from its most common colour and it uses
// many colours: an empty window is one flat colour plus a title bar.
void check_region_drawn(const Image& img, const std::string& name, const nlohmann::json& rect) {
    const int x0 = int(rect[0].get<float>()) + 4, y0 = int(rect[1].get<float>()) + 30;
    const int x1 = std::min(img.w, int(rect[0].get<float>() + rect[2].get<float>()) - 4);
    const int y1 = std::min(img.h, int(rect[1].get<float>() + rect[3].get<float>()) - 4);
    REQUIRE(x1 > x0);
    REQUIRE(y1 > y0);
    std::map<uint32_t, int> histogram;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const unsigned char* p = &img.rgb[(size_t(y) * size_t(img.w) + size_t(x)) * 3];
            ++histogram[uint32_t(p[0] >> 3) << 10 | uint32_t(p[1] >> 3) << 5 | uint32_t(p[2] >> 3)];
        }
    int dominant = 0;
    for (auto& [c, n] : histogram) dominant = std::max(dominant, n);
    const double total = double(x1 - x0) * double(y1 - y0);
    INFO("view " << name << ": " << histogram.size() << " colours, " << 100.0 * (1 - dominant / total)
                 << "% of pixels off the background");
    CHECK(histogram.size() >= 12);
    CHECK(1.0 - dominant / total >= 0.03);
}

// The error box: its background is dark red, so red dominates the region's pixels.
void check_region_red(const Image& img, const nlohmann::json& rect) {
    const int x0 = int(rect[0].get<float>()) + 2, y0 = int(rect[1].get<float>()) + 2;
    const int x1 = std::min(img.w, int(rect[0].get<float>() + rect[2].get<float>()) - 2);
    const int y1 = std::min(img.h, int(rect[1].get<float>() + rect[3].get<float>()) - 2);
    REQUIRE(x1 > x0);
    REQUIRE(y1 > y0);
    double r = 0, g = 0, b = 0;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const unsigned char* p = &img.rgb[(size_t(y) * size_t(img.w) + size_t(x)) * 3];
            r += p[0], g += p[1], b += p[2];
        }
    INFO("mean colour of the error box: " << r << " " << g << " " << b);
    CHECK(r > 2 * g);
    CHECK(r > 2 * b);
}

std::string data_file() { return sample_data_file("gui-data.txt", 30000); }

std::string ultrascope() { return bin("ultrascope"); }

}  // namespace

TEST_CASE("the GUI runs its default dp 2 x pp 2 run through its own launcher and draws every view", "[gui]") {
    const std::string shot = temp_path("live.png");
    fs::remove(shot);
    // no layout flags: the default run's dp 2 x pp 2 on 4 ranks
    const ProcessResult r = run_process(ultrascope() + " --screenshot " + shot +
                                        " --exit-when-done --preset tiny --steps 15 --data " + data_file());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);  // the run completed
    REQUIRE(fs::exists(shot));
    const auto regions = nlohmann::json::parse(read_file(shot + ".json"))["regions"];
    const Image img = load_png(shot);
    CHECK(img.w == 1280);
    for (const char* view : {"launch", "timeline", "memory", "overlap", "training", "schedule"}) {
        REQUIRE(regions.contains(view));
        check_region_drawn(img, view, regions[view]);
    }
}

TEST_CASE("the GUI opens a trace and screenshots one view at a time", "[gui]") {
    const std::string trace = temp_path("for-gui.ustrace");
    const ProcessResult made = run_process(bin("ultrascope-train") + " --preset tiny --steps 6 --quiet --trace " +
                                           trace + " --data " + data_file());
    REQUIRE(made.exit_code == 0);
    for (const us::gui::ViewName& name : us::gui::kViewNames) {  // the views of a run (app/gui/model/view_table.h)
        const std::string view = name.id;
        // the planner, a memory snapshot, the experts' router load, the comparison of runs and a hang need other
        // sources (a plan, a snapshot, a mixture-of-experts run, several runs, a hung job's dumps): their own tests
        if (name.place == us::gui::Place::over || view == "experts" || view == "compare" || view == "hang") continue;
        const std::string shot = temp_path("view-" + view + ".png");
        const ProcessResult r = run_process(ultrascope() + " " + trace + " --screenshot " + shot + " --view " + view);
        INFO(view << "\n" << r.output);
        REQUIRE(r.exit_code == 0);
        const auto regions = nlohmann::json::parse(read_file(shot + ".json"))["regions"];
        REQUIRE(regions.size() == 1);
        check_region_drawn(load_png(shot), view, regions[view]);
    }
}

TEST_CASE("without a display the screenshot mode draws offscreen (EGL), a trace and a live run", "[gui][offscreen]") {
    // What a headless GPU node does (docs/gpu.md): no DISPLAY, no X server; EGL gives an OpenGL context (Mesa's
    // llvmpipe here, the NVIDIA driver there) and the views draw into a framebuffer object.
    const std::string trace = temp_path("for-offscreen.ustrace");
    REQUIRE(run_process(bin("ultrascope-train") + " --preset tiny --steps 6 --quiet --trace " + trace + " --data " +
                        data_file())
                .exit_code == 0);
    const std::string shot = temp_path("offscreen-timeline.png");
    const std::string no_display = "env -u DISPLAY -u WAYLAND_DISPLAY ";
    const ProcessResult r =
        run_process(no_display + ultrascope() + " " + trace + " --screenshot " + shot + " --view timeline");
    INFO(r.output);
    if (r.exit_code != 0 && r.output.find("no offscreen OpenGL") != std::string::npos) {
        skip_test("no EGL driver for an offscreen context (apt-get install libegl-mesa0): " + r.output);
        return;
    }
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("drawing offscreen on EGL") != std::string::npos);
    check_region_drawn(load_png(shot), "timeline",
                       nlohmann::json::parse(read_file(shot + ".json"))["regions"]["timeline"]);
    // a live run launched by the GUI, watched to its end
    const std::string live = temp_path("offscreen-memory.png");
    const ProcessResult l = run_process(no_display + ultrascope() + " -n 1 --preset tiny --steps 6 --data " +
                                        data_file() + " --exit-when-done --view memory --screenshot " + live);
    INFO(l.output);
    REQUIRE(l.exit_code == 0);
    check_region_drawn(load_png(live), "memory", nlohmann::json::parse(read_file(live + ".json"))["regions"]["memory"]);
    // and without --screenshot there is nothing to draw into: the headless run, as before
    const ProcessResult h = run_process(no_display + ultrascope() + " " + trace);
    CHECK(h.exit_code == 0);
    CHECK(h.output.find("no display") != std::string::npos);
}

TEST_CASE("the font size scales the whole window, for a projector; a bad size is refused", "[gui]") {
    const std::string trace = temp_path("for-font.ustrace");
    REQUIRE(run_process(bin("ultrascope-train") + " --preset tiny --steps 3 --quiet --trace " + trace + " --data " +
                        data_file())
                .exit_code == 0);
    for (int px : {16, 32}) {
        const std::string shot = temp_path("font-" + std::to_string(px) + ".png");
        const ProcessResult r = run_process(ultrascope() + " " + trace + " --font-size " + std::to_string(px) +
                                            " --screenshot " + shot + " --view memory");
        INFO(r.output);
        REQUIRE(r.exit_code == 0);
        const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
        CHECK(shown["shown"]["font_px"] == px);
        check_region_drawn(load_png(shot), "memory", shown["regions"]["memory"]);
    }
    const ProcessResult bad =
        run_process(ultrascope() + " " + trace + " --font-size 200 --screenshot " + temp_path("font-bad.png"));
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("--font-size '200': expected pixels from 8 to 64") != std::string::npos);
}

TEST_CASE("a trace opened from a file puts its run's settings in the launch panel: Relaunch reproduces it", "[gui]") {
    const std::string trace = temp_path("settings.ustrace");
    const std::string flags =
        " --preset tiny --layers 3 --steps 5 --lr 0.002 --warmup 1 --seed 7 --batch 2 --grad-accum 2 "
        "--recompute selective --precision bf16 --zero 1 --bucket-mb 0.5 --no-overlap --data " +
        data_file();
    REQUIRE(run_process(bin("ultrascope-train") + flags + " --quiet --trace " + trace).exit_code == 0);
    const std::string shot = temp_path("settings.png");
    const ProcessResult r = run_process(ultrascope() + " " + trace + " --screenshot " + shot + " --view memory");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"))["shown"];
    // The panel's arguments, parsed by the trainer's own parser, give back the recorded run's settings.
    std::string args;
    for (const auto& a : shown["launch_args"]) args += " '" + a.get<std::string>() + "'";
    const ProcessResult again = run_process(bin("ultrascope-train") + args + " --print-config");
    const ProcessResult original = run_process(bin("ultrascope-train") + flags + " --print-config");
    INFO(args);
    REQUIRE(again.exit_code == 0);
    REQUIRE(original.exit_code == 0);
    auto a = nlohmann::json::parse(again.output), b = nlohmann::json::parse(original.output);
    CHECK(a == b);
}

TEST_CASE("the experts view draws a mixture-of-experts run's router load", "[gui]") {
    const std::string trace = temp_path("moe-for-gui.ustrace");
    fs::remove(trace);
    const ProcessResult made = run_process(ultrascope() +
                                           " run --dp 2 --ep 2 --preset tiny --moe-experts 4 --steps 6 "
                                           "--trace " +
                                           trace + " --data " + data_file());
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
    const std::string shot = temp_path("view-experts.png");
    const ProcessResult r = run_process(ultrascope() + " " + trace + " --screenshot " + shot + " --view experts");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto regions = nlohmann::json::parse(read_file(shot + ".json"))["regions"];
    REQUIRE(regions.contains("experts"));
    check_region_drawn(load_png(shot), "experts", regions["experts"]);
}

TEST_CASE("errors show in the window and end with a non-zero exit, never a hang", "[gui][errors]") {
    const std::string corrupt = temp_path("corrupt.ustrace");
    write_file(corrupt, "USTRACE\0 not really a trace at all, just garbage bytes ........");
    const std::string shot = temp_path("error.png");
    const ProcessResult bad = run_process(ultrascope() + " --open " + corrupt + " --screenshot " + shot);
    INFO(bad.output);
    CHECK(bad.exit_code != 0);
    REQUIRE(fs::exists(shot));
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    check_region_drawn(load_png(shot), "launch", shown["regions"]["launch"]);
    // the window showed the reason, in its red error box
    CHECK(shown["error"].get<std::string>().find(corrupt) != std::string::npos);
    REQUIRE(shown["regions"].contains("error"));
    check_region_red(load_png(shot), shown["regions"]["error"]);
    // and the same words on stderr, for a script
    CHECK(bad.output.find("ultrascope: error: " + shown["error"].get<std::string>()) != std::string::npos);
    // a screenshot that could not be written is refused before any frame is drawn
    const ProcessResult nowhere = run_process(ultrascope() + " --open " + corrupt + " --screenshot /nonexistent/x.png");
    CHECK(nowhere.exit_code == 2);
    CHECK(nowhere.output.find("--screenshot '/nonexistent/x.png': no folder") != std::string::npos);

    const ProcessResult no_mpi =
        run_process("ULTRASCOPE_MPIRUN=/nonexistent/mpirun " + ultrascope() + " --screenshot " +
                    temp_path("nompi.png") + " --exit-when-done --preset tiny --data " + data_file());
    INFO(no_mpi.output);
    CHECK(no_mpi.exit_code != 0);

    // A rank that dies: the run fails, and what it recorded up to then is still drawn.
    const std::string crash = temp_path("crash.png");
    const ProcessResult died =
        run_process(ultrascope() + " --screenshot " + crash +
                    " --exit-when-done -n 2 --dp 2 --preset tiny --steps 100000 --fault-kill-step 200 "
                    "--fault-kill-rank 1 --data " +
                    data_file());
    INFO(died.output);
    CHECK(died.exit_code != 0);
    REQUIRE(fs::exists(crash));
    const auto regions = nlohmann::json::parse(read_file(crash + ".json"))["regions"];
    const Image img = load_png(crash);
    check_region_drawn(img, "timeline", regions["timeline"]);
    check_region_drawn(img, "memory", regions["memory"]);
}

namespace {

// The GUI with its default dp 2 x pp 2 run (4 ranks) of far more steps than it gets to, in a directory of its own
// (its trace goes to runs/ there); returns once the trace holds data.
std::unique_ptr<BackgroundProcess> start_gui_run(const std::string& name, std::string& data, std::string& trace) {
    const fs::path dir = temp_path("gui-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    data = sample_data_file("gui-lifetime-" + name + ".txt", 30000);
    auto gui = std::make_unique<BackgroundProcess>("sh -c 'cd " + dir.string() + " && exec " + ultrascope() +
                                                       " --preset tiny --steps 1000000 --data " + data + "'",
                                                   (dir / "gui.log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < deadline && !gui->exited()) {
        if (fs::exists(dir / "runs"))
            for (const auto& e : fs::directory_iterator(dir / "runs"))
                if (e.path().extension() == ".ustrace" && fs::file_size(e.path()) > 50000) trace = e.path().string();
        if (!trace.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    INFO(gui->output());
    REQUIRE(!trace.empty());
    REQUIRE(processes_matching(data) >= 5);  // the GUI, mpirun and four ranks
    return gui;
}

}  // namespace

TEST_CASE("the GUI closed by SIGTERM stops its run first: no process of it remains, the trace reads",
          "[gui][lifetime]") {
    std::string data, trace;
    auto gui = start_gui_run("term", data, trace);
    gui->signal(SIGTERM);
    const std::optional<int> code = gui->wait_exit(20);
    INFO(gui->output());
    REQUIRE(code == 128 + SIGTERM);
    CHECK(gui->output().find("stopping the run and closing") != std::string::npos);
    CHECK(wait_processes_gone(data, 10) == 0);
    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    INFO(rep.output);
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output.substr(rep.output.find('{')));
    REQUIRE(j["ranks"].size() == 4);
    for (const auto& r : j["ranks"]) CHECK(r["status"].get<std::string>().rfind("stopped: SIGTERM", 0) == 0);
}

TEST_CASE("the GUI killed by SIGKILL: its run stops within 10 s, the trace reads", "[gui][lifetime]") {
    std::string data, trace;
    auto gui = start_gui_run("kill", data, trace);
    gui->signal(SIGKILL);
    REQUIRE(gui->wait_exit(5) == 128 + SIGKILL);
    CHECK(wait_processes_gone(data, 10) == 0);
    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    INFO(rep.output);
    REQUIRE(rep.exit_code == 0);
    CHECK(nlohmann::json::parse(rep.output.substr(rep.output.find('{')))["ranks"].size() == 4);
}

TEST_CASE("a failed run that saved checkpoints shows its last one and offers to resume from it", "[gui][checkpoint]") {
    const std::string shot = temp_path("resume.png"), checkpoint = temp_path("gui-resume.safetensors");
    fs::remove(checkpoint);
    const ProcessResult r = run_process(
        ultrascope() + " --screenshot " + shot + " --exit-when-done -n 2 --dp 2 --preset tiny " + "--steps 40 --save " +
        checkpoint + " --save-every 4 --fault-kill-step 11 " + "--fault-kill-rank 1 --data " + data_file());
    INFO(r.output);
    CHECK(r.exit_code != 0);
    REQUIRE(fs::exists(checkpoint));
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    CHECK(shown["shown"]["last_checkpoint_step"] == 8);  // written after steps 4 and 8; killed at the start of 11
    CHECK(shown["shown"]["last_checkpoint_path"] == checkpoint);
    CHECK(shown["regions"].contains("resume"));  // the "Resume from it" button
}

TEST_CASE("a live run that hangs ends with its ranks' dumps and opens on the Hang view, its culprit named",
          "[gui][hang]") {
    const std::string shot = temp_path("live-hang.png");
    const ProcessResult r = run_process(
        ultrascope() + " --screenshot " + shot + " --exit-when-done -n 2 --dp 2 --preset tiny --steps 1000 " +
        "--hang-rank 1 --hang-at-step 3 --hang-kind skip --hang-timeout 3 --data " + data_file());
    INFO(r.output);
    CHECK(r.exit_code != 0);  // a hung run is not a success
    const auto saved = nlohmann::json::parse(read_file(shot + ".json"));
    INFO(saved["shown"].dump(1));
    CHECK(saved["shown"]["layout"] == "hung_job");
    REQUIRE(saved["regions"].contains("hang"));
    const auto& hang = saved["shown"]["hang"];
    CHECK(hang["dumps"] == 2);
    CHECK(hang["kind"] == "missing");
    CHECK(hang["culprit_ranks"] == nlohmann::json::array({1}));
}

TEST_CASE("a lesson launches its runs in turn, outlines where to look and checks its claim", "[gui][lesson]") {
    const std::string shot = temp_path("lesson.png");
    const ProcessResult r = run_process(ultrascope() +
                                        " --lesson mixed-precision --lesson-runs all --high-contrast "
                                        "--screenshot " +
                                        shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    const auto& lesson = shown["shown"]["lesson"];
    CHECK(lesson["name"] == "mixed-precision");
    CHECK(lesson["runs_measured"].size() == 3);  // every run launched, one after the other, and measured
    CHECK(lesson["compared_runs"].get<int>() >= 2);
    REQUIRE(!lesson["claims"].empty());
    for (const auto& c : lesson["claims"]) {
        INFO(c.dump());
        CHECK(c["status"] == "held");
    }
    const auto& regions = shown["regions"];
    REQUIRE(regions.contains("lesson"));
    check_region_drawn(load_png(shot), "lesson", regions["lesson"]);
    CHECK(regions.contains("highlight memory"));  // the lesson's figures are pointed at in their view

    // Issue 32: the notes belong to the lesson's runs. Over another run's views (here a trace of a run that is not
    // the pipeline lesson's) no view carries the lesson's notes.
    const std::string other = temp_path("not-the-lesson.ustrace"), over = temp_path("lesson-over-other.png");
    REQUIRE(run_process(bin("ultrascope-train") + " --preset tiny --steps 3 --quiet --trace " + other + " --data " +
                        data_file())
                .exit_code == 0);
    REQUIRE(run_process(ultrascope() + " --lesson pipeline --open " + other + " --view all --screenshot " + over)
                .exit_code == 0);
    const auto over_regions = nlohmann::json::parse(read_file(over + ".json"))["regions"];
    REQUIRE(over_regions.contains("memory"));  // the views the lesson points at are drawn, without its notes
    for (const auto& [name, region] : over_regions.items()) CHECK(name.rfind("highlight", 0) == std::string::npos);

    const ProcessResult bad =
        run_process(ultrascope() + " --lesson no-such-lesson --screenshot " + temp_path("bad-lesson.png"));
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("no lesson 'no-such-lesson'") != std::string::npos);
}

TEST_CASE("the planner view ranks the layouts of a model on a cluster, predicted, and names a bad model",
          "[gui][planner]") {
    const std::string shot = temp_path("planner.png");
    const ProcessResult r = run_process(ultrascope() +
                                        " --no-launch --plan gpt3-175b --plan-gpus 1024 --view planner "
                                        "--screenshot " +
                                        shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    const auto& planner = shown["shown"]["planner"];
    CHECK(planner["model"] == "gpt3-175b");
    CHECK(planner["layouts"].get<int>() > 10);
    CHECK(planner["best_fits"] == true);  // 175B fits 1024 80 GiB GPUs in some layout
    const double mfu = planner["best_mfu"].get<double>();
    CHECK(mfu > 0.1);
    CHECK(mfu < 0.8);
    check_region_drawn(load_png(shot), "planner", shown["regions"]["planner"]);

    const std::string bad_shot = temp_path("planner-bad.png");
    const ProcessResult bad =
        run_process(ultrascope() + " --no-launch --plan no-such-model --view planner --screenshot " + bad_shot);
    INFO(bad.output);
    const auto bad_shown = nlohmann::json::parse(read_file(bad_shot + ".json"));
    CHECK(bad_shown["shown"]["planner_error"].get<std::string>().find("no-such-model") != std::string::npos);
}

TEST_CASE("a planned layout's predicted step shows in the run views, marked predicted", "[gui][planner]") {
    const std::string shot = temp_path("planner-show.png");
    const ProcessResult r = run_process(ultrascope() +
                                        " --no-launch --plan llama3-405b --plan-gpus 8192 --plan-show "
                                        "--view all --screenshot " +
                                        shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    const auto& source = shown["shown"]["source"];
    INFO(source.dump());
    CHECK(source["provenance"] == "predicted");
    CHECK(source["label"].get<std::string>().find("predicted (planner model): llama3-405b on 8192") == 0);
    CHECK(source["ranks"].get<int>() > 1);  // the best layout of 405B on 8,192 GPUs has a pipeline: a rank per stage
    // The views read the prediction as they read a run: its step time and MFU are the planner's best layout's.
    CHECK(source["mfu"].get<double>() == Approx(shown["shown"]["planner"]["best_mfu"].get<double>()).epsilon(1e-6));
    const auto png = load_png(shot);
    for (const char* view : {"timeline", "memory", "overlap"}) check_region_drawn(png, view, shown["regions"][view]);
}

TEST_CASE("a planned layout launched from the planner is measured beside its prediction", "[gui][planner]") {
    const std::string shot = temp_path("planner-launch.png");
    const ProcessResult r = run_process(ultrascope() +
                                        " --no-launch --plan tiny --plan-gpus 2 --plan-launch "
                                        "--screenshot " +
                                        shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"))["shown"];
    REQUIRE(shown.contains("planner_launched"));
    const auto& l = shown["planner_launched"];
    INFO(l.dump());
    CHECK(l["ranks"].get<int>() == 2);
    CHECK(l["step_s_measured"].get<double>() > 0);
    // This engine's model: the planner's memory is the engine's exact walk, so the measured peak matches it.
    const double predicted = l["memory_predicted"].get<double>(), measured = l["memory_measured"].get<double>();
    REQUIRE(measured > 0);
    CHECK(std::abs(predicted - measured) <= 0.02 * measured);
}

TEST_CASE("a PyTorch memory snapshot opens in its own view: the timeline, the peak and what held it",
          "[gui][snapshot]") {
    const std::string shot = temp_path("snapshot.png");
    const std::string snapshot = std::string(US_TEST_DATA_DIR) + "/snapshot/rank0_memory_snapshot.pickle";
    const ProcessResult r = run_process(ultrascope() + " " + snapshot + " --view snapshot --screenshot " + shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    const auto& devices = shown["shown"]["snapshot"]["devices"];
    REQUIRE(devices.size() == 1);
    CHECK(devices[0]["peak_allocated"] ==
          26 * 1024 * 1024);  // the fixture's peak (tests/tools/make_snapshot_fixtures.py)
    CHECK(devices[0]["reserved_bytes"] == 28 * 1024 * 1024);
    CHECK(devices[0]["ooms"] == 1);
    check_region_drawn(load_png(shot), "snapshot", shown["regions"]["snapshot"]);

    // A hostile pickle (a class and a call) is refused with a message, in the window, and a non-zero exit.
    const std::string bad_shot = temp_path("snapshot-bad.png");
    const ProcessResult bad =
        run_process(ultrascope() + " " + std::string(US_TEST_DATA_DIR) +
                    "/snapshot/hostile/global_reduce_p2.pickle --view snapshot --screenshot " + bad_shot);
    INFO(bad.output);
    const auto bad_shown = nlohmann::json::parse(read_file(bad_shot + ".json"));
    CHECK(bad_shown["error"].get<std::string>().find("never executes") != std::string::npos);
}

TEST_CASE("a hung job's Flight Recorder dumps open on the Hang view: the culprit, its group, the ranks folded",
          "[gui][hang]") {
    // 16 ranks, dp 4 x tp 4 (tests/tools/hang_dumps/make_hang_dumps.cpp): rank 6 never enters its tp group's
    // all-reduce; rank 13 left no dump
    const std::string dir = temp_path("hang-dumps");
    fs::remove_all(dir);
    const ProcessResult made =
        run_process(bin("make_hang_dumps") + " " + dir + " --ranks 16 --tp 4 --stop-rank 6 --no-dump 13");
    INFO(made.output);
    REQUIRE(made.exit_code == 0);
    // The whole window: the Hang view beside the timeline, where an engine run's memory view is.
    const std::string shot = temp_path("hang-layout.png");
    const ProcessResult r = run_process(ultrascope() + " " + dir + " --screenshot " + shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    auto saved = nlohmann::json::parse(read_file(shot + ".json"));
    INFO(saved["shown"].dump(1));
    CHECK(saved["shown"]["layout"] == "hung_job");
    REQUIRE(saved["regions"].contains("hang"));
    CHECK_FALSE(saved["regions"].contains("memory"));  // a tab now
    check_region_drawn(load_png(shot), "hang", saved["regions"]["hang"]);
    const auto& hang = saved["shown"]["hang"];
    CHECK(hang["dumps"] == 15);
    CHECK(hang["kind"] == "missing");
    CHECK(hang["culprit_ranks"] == nlohmann::json::array({6}));
    CHECK(hang["group"] == "tp1");    // the root, not its dp victims
    CHECK(hang["picked_rank"] == 6);  // its entries show
    REQUIRE(hang["grid"]["bands"].size() == 2);
    CHECK(hang["grid"]["bands"][0]["label"] == "ranks 4-5, 7 (3)");
    CHECK(hang["grid"]["bands"][0]["progress"] == "completed through #22, waiting in #23");
    CHECK(hang["grid"]["bands"][1]["label"] == "rank 6");
    CHECK(hang["grid"]["bands"][1]["culprit"] == true);
    CHECK(hang["grid"]["seqs"].back() == 23);

    // The view alone, opened from a glob of the files (quoted: the GUI expands it, as the report does).
    const std::string alone = temp_path("hang-view.png");
    const ProcessResult g =
        run_process(ultrascope() + " '" + dir + "/comm_lib_trace_rank_*' --view hang --screenshot " + alone);
    INFO(g.output);
    REQUIRE(g.exit_code == 0);
    saved = nlohmann::json::parse(read_file(alone + ".json"));
    CHECK(saved["shown"]["hang"]["dumps"] == 15);
    check_region_drawn(load_png(alone), "hang", saved["regions"]["hang"]);

    // Without a display: the hang report's text, its verdict first.
    const ProcessResult h = run_process("env -u DISPLAY -u WAYLAND_DISPLAY " + ultrascope() + " " + dir);
    INFO(h.output);
    CHECK(h.exit_code == 0);
    CHECK(h.output.find("no display") != std::string::npos);
    CHECK(h.output.find("rank 6 (on node-0) never entered all_reduce #23 of group 'tp1'") != std::string::npos);

    // A file that is no dump among them is named in the window (an error: a non-zero exit), and the rest analysed.
    write_file(dir + "/comm_lib_trace_rank_13", "not a dump");
    const std::string bad = temp_path("hang-bad.png");
    const ProcessResult b =
        run_process(ultrascope() + " '" + dir + "/comm_lib_trace_rank_*' --view hang --screenshot " + bad);
    INFO(b.output);
    CHECK(b.exit_code != 0);
    saved = nlohmann::json::parse(read_file(bad + ".json"));
    CHECK(saved["error"].get<std::string>().find("comm_lib_trace_rank_13") != std::string::npos);
    CHECK(saved["shown"]["hang"]["dumps"] == 15);
    CHECK(saved["shown"]["hang"]["left_out"] == 1);
    CHECK(saved["shown"]["hang"]["culprit_ranks"] == nlohmann::json::array({6}));
}

TEST_CASE("a PyTorch run opens a rank at a time; a damaged file is named and the other ranks are drawn",
          "[gui][kineto]") {
    const std::string run = std::string(US_TEST_DATA_DIR) + "/kineto/dp2_tp2/iteration_4";
    const std::string shot = temp_path("kineto-run.png");
    const ProcessResult ok = run_process(ultrascope() + " " + run + " --screenshot " + shot);
    INFO(ok.output);
    REQUIRE(ok.exit_code == 0);
    auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    CHECK(shown["shown"]["source"]["ranks"] == 4);
    check_region_drawn(load_png(shot), "timeline", shown["regions"]["timeline"]);

    // Rank 1's file cut in half: the window names it, shows ranks 0, 2 and 3, and the exit code says it failed.
    const fs::path dir = temp_path("kineto-cut");
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (int r : {0, 2, 3})
        fs::copy_file(run + "/rank" + std::to_string(r) + "_trace.json.gz",
                      dir / ("rank" + std::to_string(r) + "_trace.json.gz"));
    const std::string bytes = read_file(run + "/rank1_trace.json.gz");
    const std::string cut = (dir / "rank1_trace.json.gz").string();
    write_file(cut, bytes.substr(0, bytes.size() / 2));
    const std::string bad_shot = temp_path("kineto-cut.png");
    const ProcessResult bad = run_process(ultrascope() + " " + dir.string() + " --screenshot " + bad_shot);
    INFO(bad.output);
    CHECK(bad.exit_code != 0);
    REQUIRE(fs::exists(bad_shot));
    shown = nlohmann::json::parse(read_file(bad_shot + ".json"));
    CHECK(shown["shown"]["source"]["ranks"] == 3);
    CHECK(shown["error"].get<std::string>().find(cut) != std::string::npos);
    check_region_drawn(load_png(bad_shot), "timeline", shown["regions"]["timeline"]);
}

TEST_CASE("a PyTorch run of several ranks opens on the Ranks view and its verdict, the launch settings folded",
          "[gui][kineto][blame]") {
    // 4 DDP ranks, rank 2 slow (tests/data/kineto/blame/README.md)
    const std::string run = std::string(US_TEST_DATA_DIR) + "/kineto/blame/ddp_slow_rank";
    const std::string shot = temp_path("kineto-opening.png");
    const ProcessResult r = run_process(ultrascope() + " " + run + " --screenshot " + shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto saved = nlohmann::json::parse(read_file(shot + ".json"));
    const auto& regions = saved["regions"];
    INFO(saved["shown"].dump(1));
    CHECK(saved["shown"]["layout"] == "multi_rank_trace");
    REQUIRE(regions.contains("ranks"));       // beside the timeline, where an engine run's memory view is
    CHECK_FALSE(regions.contains("memory"));  // a tab now
    const Image img = load_png(shot);
    check_region_drawn(img, "ranks", regions["ranks"]);
    check_region_drawn(img, "launch", regions["launch"]);
    CHECK(saved["shown"]["ranks_view"]["culprit"] == 2);
}

namespace {

// The store's bytes on each frame_stats line of `log`, in order.
std::vector<double> store_bytes_lines(const std::string& log) {
    std::vector<double> out;
    for (size_t at = log.find("store_bytes "); at != std::string::npos; at = log.find("store_bytes ", at + 1))
        out.push_back(std::atof(log.c_str() + at + 12));
    return out;
}

}  // namespace

TEST_CASE("the GUI closed while a PyTorch run loads exits at once: the loaders stop and are joined",
          "[gui][kineto][lifetime]") {
    const fs::path dir = temp_path("kineto-closed-mid-load");
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (int r = 0; r < 8; ++r)
        us::test::write_synthetic_kineto((dir / ("rank" + std::to_string(r) + "_trace.json")).string(), r, 60);
    BackgroundProcess gui("env ULTRASCOPE_FRAME_STATS_S=0.1 " + ultrascope() + " " + dir.string(),
                          (dir / "gui.log").string());
    // Closed as soon as a rank is on screen (a frame_stats line with a store).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::vector<double> bytes;
    while (std::chrono::steady_clock::now() < give_up && !gui.exited()) {
        bytes = store_bytes_lines(gui.output());
        if (!bytes.empty() && bytes.back() > 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(!bytes.empty());
    REQUIRE(bytes.back() > 0);
    const auto t0 = std::chrono::steady_clock::now();
    gui.signal(SIGTERM);
    const std::optional<int> code = gui.wait_exit(10);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(gui.output());
    INFO("exited " << seconds << " s after SIGTERM; the store held " << bytes.back() << " bytes when it was sent");
    REQUIRE(code == 128 + SIGTERM);
    CHECK(seconds < 5);  // a worker stops at its next read of 256 KiB, or when its rank's mapping ends
    CHECK(gui.output().find("stopping the run and closing") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("the memory view of an imported PyTorch run stacks its categories: measured beside a timeline, else inferred",
          "[gui][snapshot]") {
    const std::string ddp = std::string(US_TEST_DATA_DIR) + "/kineto/ddp";
    const std::string shot = temp_path("memory-categories.png");
    const ProcessResult r = run_process(ultrascope() + " " + ddp + " --view memory --screenshot " + shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"));
    INFO(shown.dump());
    const auto& ranks = shown["shown"]["memory_categories"]["ranks"];
    REQUIRE(ranks.size() == 2);
    CHECK(ranks[0]["basis"] == "measured");  // memory_timeline_rank0.json.gz lies in the run's folder
    CHECK(ranks[0]["total_peak_bytes"] == 8266464);
    CHECK(ranks[1]["basis"] == "inferred");
    check_region_drawn(load_png(shot), "memory", shown["regions"]["memory"]);
}

TEST_CASE("a run of more rank files than the GUI holds whole opens from digests in the Ranks view, its straggler named",
          "[gui][blame]") {
    // 80 synthetic rank files (bench_blame's generator): rank 33 computes 1.5x between collectives, the others wait
    const std::string dir = temp_path("gui-large-run");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const int ranks = 80, slow = 33;
    us::bench::RankSkew skew;
    for (int r = 0; r < ranks; ++r) {
        skew.interval_scale = [&](int, int) { return r == slow ? 1.5 : 1.0; };
        skew.wait_us = [&](int, int) { return r == slow ? 0.0 : 20 * 60 * 0.5; };
        us::bench::write_kineto_rank("", dir + "/rank" + std::to_string(r) + ".json.gz", 1.6, r, ranks, 1, &skew);
    }
    const std::string shot = temp_path("ranks-large.png");
    const ProcessResult r = run_process(ultrascope() + " " + dir + " --view ranks --screenshot " + shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto saved = nlohmann::json::parse(read_file(shot + ".json"));
    check_region_drawn(load_png(shot), "ranks", saved["regions"]["ranks"]);
    const auto& view = saved["shown"]["ranks_view"];
    INFO(view.dump(1));
    CHECK(view["ranks"] == ranks);
    CHECK(view["from_digests"] == true);
    CHECK(view["culprit"] == slow);
    CHECK(saved["shown"]["source"]["ranks"] == 0);  // no rank's spans are held until one is opened
}

TEST_CASE("the GUI launches its run onto emulated nodes and removes them after", "[gui][nodes]") {
    if (const std::string why = us::test::why_no_emulated_nodes(); !why.empty()) us::test::skip_test(why);
    const std::string shot = temp_path("gui-nodes.png");
    const ProcessResult r = run_process(ultrascope() + " --nodes 2 -n 2 --dp 2 --preset tiny --steps 3 --data " +
                                        data_file() + " --exit-when-done --view timeline --screenshot " + shot);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto shown = nlohmann::json::parse(read_file(shot + ".json"))["shown"];
    CHECK(shown["source"]["ranks"] == 2);
    CHECK(shown["source"]["step_s"].get<double>() > 0);
    // the overlap view marks the data-parallel group as crossing the link between the nodes
    CHECK(shown["overlap_groups"].dump().find("dp (across 2 nodes)") != std::string::npos);
    CHECK(us::test::stale_emulated_nodes().empty());  // the GUI's are gone (other tests may have their own)
}

TEST_CASE("every one of HTA's test traces opens in the timeline and the ops view", "[gui][kineto][hta]") {
    const fs::path root = fs::path(US_TEST_DATA_DIR) / "kineto" / "hta";
    int opened = 0;
    for (const auto& entry : fs::directory_iterator(root)) {
        if (!entry.is_directory()) continue;
        for (const char* view : {"timeline", "ops"}) {
            const std::string shot = temp_path("hta-" + entry.path().filename().string() + "-" + view + ".png");
            const ProcessResult r =
                run_process(ultrascope() + " " + entry.path().string() + " --view " + view + " --screenshot " + shot);
            INFO(entry.path() << " " << view << "\n" << r.output);
            REQUIRE(r.exit_code == 0);
            const auto saved = nlohmann::json::parse(read_file(shot + ".json"));
            CHECK(saved["shown"]["source"]["ranks"].get<int>() >= 1);
            check_region_drawn(load_png(shot), view, saved["regions"][view]);
        }
        ++opened;
    }
    CHECK(opened == 19);
}
