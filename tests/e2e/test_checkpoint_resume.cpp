// Long runs keep their progress: --save-every K writes the checkpoint atomically every K steps, and a run killed at
// any point resumes with --load and the same --steps, continuing bitwise as if it had never stopped (the cosine
// schedule is the planned run's). A full disk leaves the previous checkpoint whole and the trace readable.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

std::string data_file() { return sample_data_file("resume-data.txt", 20000); }

// step -> (loss, grad norm, learning rate), from a --metrics-out file (rank 0's lines).
std::map<int, std::array<double, 3>> metrics_by_step(const std::string& path) {
    std::map<int, std::array<double, 3>> out;
    std::istringstream lines(read_file(path));
    std::string line;
    while (std::getline(lines, line)) {
        const auto m = nlohmann::json::parse(line);
        out[m["step"].get<int>()] = {m["loss"].get<double>(), m["grad_norm"].get<double>(), m["lr"].get<double>()};
    }
    return out;
}

void check_resume_is_bitwise(const std::string& name, const std::string& layout) {
    const std::string run = bin("ultrascope") + " run " + layout + " --preset tiny --steps 12 --data " + data_file();
    const std::string whole = temp_path(name + "-whole.jsonl"), resumed = temp_path(name + "-resumed.jsonl");
    const std::string checkpoint = temp_path(name + ".safetensors");
    for (const auto& f : {whole, resumed, checkpoint}) fs::remove(f);
    const ProcessResult a = run_process(run + " --metrics-out " + whole + " --trace " + temp_path(name + "-a.ustrace"));
    INFO(a.output);
    REQUIRE(a.exit_code == 0);
    // Killed at the start of step 8: the checkpoints of steps 3 and 6 were written; the last is step 6's.
    const ProcessResult b =
        run_process(run + " --save " + checkpoint + " --save-every 3 --fault-kill-step 8 --fault-kill-rank 1" +
                    " --trace " + temp_path(name + "-b.ustrace"));
    INFO(b.output);
    REQUIRE(b.exit_code != 0);
    REQUIRE(fs::exists(checkpoint));
    CHECK(b.output.find("the last checkpoint is step 6") != std::string::npos);
    for (const auto& e : fs::directory_iterator(fs::path(checkpoint).parent_path()))  // no temporary left behind
        CHECK(e.path().string().find(".safetensors.tmp") == std::string::npos);
    const ProcessResult c = run_process(run + " --load " + checkpoint + " --metrics-out " + resumed + " --trace " +
                                        temp_path(name + "-c.ustrace"));
    INFO(c.output);
    REQUIRE(c.exit_code == 0);
    const auto expected = metrics_by_step(whole), got = metrics_by_step(resumed);
    REQUIRE(expected.size() == 12);
    REQUIRE(got.size() == 6);
    for (const auto& [step, values] : got) {
        INFO(name << " step " << step);
        REQUIRE(step >= 7);
        CHECK(values == expected.at(step));  // bitwise: loss, gradient norm, learning rate
    }
}

}  // namespace

TEST_CASE("a run killed mid-way resumes from its --save-every checkpoint and continues bitwise, dp 2 ZeRO-1",
          "[cpu][app][checkpoint]") {
    check_resume_is_bitwise("resume-dp2", "-n 2 --dp 2 --zero 1");
}

TEST_CASE("a pipeline run killed mid-way resumes from its --save-every checkpoint and continues bitwise",
          "[cpu][app][checkpoint][pipeline]") {
    check_resume_is_bitwise("resume-pp2", "-n 2 --pp 2 --pp-schedule 1f1b --grad-accum 2");
}

TEST_CASE("ultrascope-train --save-every needs --save, and a positive interval", "[cpu][app][checkpoint][errors]") {
    const ProcessResult r =
        run_process(bin("ultrascope-train") + " --preset tiny --save-every 5 --data " + data_file());
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--save") != std::string::npos);
    const ProcessResult n = run_process(bin("ultrascope-train") +
                                        " --preset tiny --save x.safetensors --save-every -1 --data " + data_file());
    CHECK(n.exit_code != 0);
}

// A full disk, made on one machine with a file-size limit (the write fails with EFBIG as it would with ENOSPC).
TEST_CASE("a full disk: the checkpoint's error says so, the previous checkpoint stays whole, the trace reads",
          "[cpu][app][checkpoint][errors]") {
    const std::string checkpoint = temp_path("full-disk.safetensors");
    const std::string train = bin("ultrascope-train") + " --preset tiny --quiet --data " + data_file();
    REQUIRE(run_process(train + " --steps 2 --save " + checkpoint).exit_code == 0);
    const std::string before = read_file(checkpoint);
    REQUIRE(before.size() > 1'000'000);
    auto limited = [](const std::string& kib, const std::string& command) {
        return run_process("bash -c \"trap '' XFSZ; ulimit -f " + kib + "; exec " + command + "\"");
    };

    const std::string trace = temp_path("full-disk.ustrace");
    const ProcessResult r = limited("600", train + " --steps 8 --save " + checkpoint + " --trace " + trace);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("cannot write checkpoint") != std::string::npos);
    CHECK(r.output.find("the previous checkpoint is unchanged") != std::string::npos);
    CHECK(read_file(checkpoint) == before);
    const ProcessResult rep = run_process(bin("ultrascope") + " report " + trace + " --json");
    INFO(rep.output);
    CHECK(rep.exit_code == 0);

    // The trace is what fills the disk: it stops at its last whole chunk and says so; the run goes on.
    const std::string big = temp_path("full-disk-trace.ustrace");
    const std::string metrics = temp_path("full-disk-trace.jsonl");
    const ProcessResult t = limited("100", train + " --steps 200 --trace " + big);
    INFO(t.output);
    CHECK(t.exit_code == 0);
    CHECK(t.output.find("cannot write trace file") != std::string::npos);
    CHECK(fs::file_size(big) <= 100 * 1024);
    const ProcessResult rt = run_process(bin("ultrascope") + " report " + big + " --json");
    INFO(rt.output);
    REQUIRE(rt.exit_code == 0);
    const auto j = nlohmann::json::parse(rt.output.substr(rt.output.find('{')));
    CHECK(j["ranks"][0]["steps"].size() >= 5);
    CHECK(rt.output.find("ends inside chunk") == std::string::npos);  // cut at a chunk boundary
}
