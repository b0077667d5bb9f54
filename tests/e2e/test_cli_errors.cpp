// Bad input to ultrascope-train: each case must print a clear message, exit non-zero, and write nothing
// (neither the checkpoint nor the metrics file it was asked for).
#include <filesystem>

#include "engine/train/safetensors.h"
#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

struct Outputs {
    std::string save = temp_path("bad-input-out.safetensors");
    std::string metrics = temp_path("bad-input-metrics.jsonl");
    std::string flags() const { return " --save " + save + " --metrics-out " + metrics + " --quiet"; }
    void clear() const {
        fs::remove(save);
        fs::remove(metrics);
    }
};

void expect_refused(const std::string& args, const std::string& message_part, const std::string& env = "") {
    Outputs out;
    out.clear();
    const ProcessResult r = run_process(env + bin("ultrascope-train") + " " + args + out.flags());
    INFO("ultrascope-train " << args << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(message_part) != std::string::npos);
    CHECK(r.output.find("internal error") == std::string::npos);
    CHECK_FALSE(fs::exists(out.save));
    CHECK_FALSE(fs::exists(out.metrics));
}

std::string good_data() { return sample_data_file("cli-data.txt", 20000); }

std::string tiny() { return "--preset tiny --steps 1 --data " + good_data(); }

}  // namespace

TEST_CASE("bad data files are refused", "[cpu][cli][errors]") {
    expect_refused("--preset tiny --data /nonexistent/file.txt", "cannot read --data '/nonexistent/file.txt'");
    expect_refused("--preset tiny --data " + fs::temp_directory_path().string(), "it is a folder");
    const std::string empty = temp_path("empty.txt");
    write_file(empty, "");
    expect_refused("--preset tiny --data " + empty, "is empty");
    const std::string short_file = temp_path("short.txt");
    write_file(short_file, "too short for one batch");
    expect_refused("--preset tiny --data " + short_file, "too short");
}

TEST_CASE("bad model shapes and sizes are refused", "[cpu][cli][errors]") {
    expect_refused(tiny() + " --hidden 30 --heads 4", "not divisible by --heads");
    expect_refused(tiny() + " --layers 0", "--layers must be positive");
    expect_refused(tiny() + " --batch -1", "--batch must be positive");
    expect_refused(tiny() + " --seq 0", "--seq must be positive");
    expect_refused(tiny() + " --vocab 100", "too small for the byte-level tokenizer");
    // sizes beyond any model: every count of the model fits 64 bits (a hidden of 2^30 counted negative parameters)
    expect_refused(tiny() + " --hidden 1073741824 --heads 1", "--hidden 1073741824 is beyond any model");
    expect_refused(tiny() + " --threads 100000", "--threads must be from 0");
    // settings that were taken in silence: a conflict, an infinite rate, ranks the layout does not have
    expect_refused(tiny() + " --global-batch 8 --batch 2 --dp 2 --grad-accum 3", "not the --grad-accum 3 given");
    expect_refused(tiny() + " --lr inf", "--lr must be a positive number");
    expect_refused(tiny() + " --min-lr-ratio 2", "--min-lr-ratio must be from 0 to 1");
    expect_refused(tiny() + " --slow-rank 5", "--slow-rank must be a rank, 0 to 0");
    expect_refused(tiny() + " --fault-kill-step 2 --fault-kill-rank 7", "--fault-kill-rank must be a rank");
    expect_refused(tiny() + " --layers abc", "--layers");
    expect_refused(tiny() + " --precision fp16", "unknown --precision");
    expect_refused(tiny() + " --recompute most", "unknown --recompute");
    expect_refused(tiny() + " --zero 5", "unknown --zero stage");
    expect_refused(tiny() + " --pp-schedule gpipe", "unknown --pp-schedule");
    expect_refused(tiny() + " --no-such-flag", "no-such-flag");
}

TEST_CASE("unknown presets and bad config files are refused", "[cpu][cli][errors]") {
    expect_refused("--preset nope --data " + good_data(), "unknown preset 'nope'");
    const std::string bad_json = temp_path("bad.json");
    write_file(bad_json, "{\"layers\": 2,");
    expect_refused(tiny() + " --config " + bad_json, "not valid JSON");
    const std::string unknown_key = temp_path("unknown.json");
    write_file(unknown_key, "{\"layerz\": 2}");
    expect_refused(tiny() + " --config " + unknown_key, "unknown setting 'layerz'");
    const std::string wrong_type = temp_path("wrong.json");
    write_file(wrong_type, "{\"layers\": \"two\"}");
    expect_refused(tiny() + " --config " + wrong_type, "'layers' must be an integer");
}

TEST_CASE("corrupt, truncated and mismatched checkpoints are refused", "[cpu][cli][errors][checkpoint]") {
    const std::string garbage = temp_path("garbage.safetensors");
    write_file(garbage, "this is not a checkpoint at all, just some bytes");
    expect_refused(tiny() + " --load " + garbage, "truncated or corrupt");

    // a real checkpoint of the tiny model, then damaged copies of it
    const std::string good = temp_path("good.safetensors");
    const ProcessResult made =
        run_process(bin("ultrascope-train") + " " + tiny() + " --steps 0 --quiet --save " + good);
    REQUIRE(made.exit_code == 0);
    const std::string bytes = read_file(good);
    const std::string truncated = temp_path("truncated.safetensors");
    write_file(truncated, bytes.substr(0, bytes.size() / 2));
    expect_refused(tiny() + " --load " + truncated, "truncated or corrupt");
    std::string bad_header = bytes;
    bad_header[12] = '#';
    const std::string corrupt = temp_path("corrupt.safetensors");
    write_file(corrupt, bad_header);
    expect_refused(tiny() + " --load " + corrupt, "corrupt");
    expect_refused(tiny() + " --hidden 128 --load " + good, "holds a model with hidden 64");
    expect_refused(tiny() + " --load /nonexistent.safetensors",
                   "cannot read --load '/nonexistent.safetensors': no such file");
    // refused before the trace is opened: an earlier run's trace at --trace is kept whole
    const std::string kept = temp_path("kept.ustrace");
    write_file(kept, "an earlier run's trace");
    expect_refused(tiny() + " --trace " + kept + " --load /nonexistent.safetensors", "cannot read --load");
    expect_refused(tiny() + " --trace " + kept + " --data /nonexistent.txt", "cannot read --data");
    CHECK(read_file(kept) == "an earlier run's trace");
}

TEST_CASE("a --save that cannot be written is refused before the first step, and the check leaves nothing",
          "[cpu][cli][errors][checkpoint]") {
    const std::string folder = temp_path("save-check");
    fs::remove_all(folder);
    fs::create_directories(folder);
    const std::pair<std::string, std::string> cases[] = {{"/nonexistent/dir/x.safetensors", "No such file"},
                                                         {folder, "it is a folder"}};
    for (const auto& [save, why] : cases) {
        const ProcessResult r = run_process(bin("ultrascope-train") + " " + tiny() + " --steps 2 --save " + save);
        INFO(save << ": " << r.output);
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("cannot write --save '" + save + "': " + why) != std::string::npos);
        CHECK(r.output.find("nothing was trained") != std::string::npos);
        CHECK(r.output.find("step 1/") == std::string::npos);
        // `ultrascope run` asks on this machine, where its ranks run, before it launches: no trace is written
        const std::string trace = temp_path("save-check.ustrace");
        fs::remove(trace);
        const ProcessResult run =
            run_process(bin("ultrascope") + " run " + tiny() + " --steps 2 --save " + save + " --trace " + trace);
        INFO(run.output);
        CHECK(run.exit_code == 2);
        CHECK(run.output.find("cannot write --save '" + save + "': " + why) != std::string::npos);
        CHECK(run.output.find("(nothing was launched)") != std::string::npos);
        CHECK_FALSE(fs::exists(trace));
    }
    const std::string ckpt = folder + "/ok.safetensors";
    REQUIRE(run_process(bin("ultrascope-train") + " " + tiny() + " --quiet --save " + ckpt).exit_code == 0);
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(folder)) left.push_back(e.path().filename().string());
    CHECK(left == std::vector<std::string>{"ok.safetensors"});  // the probe's temporary file is gone
}

TEST_CASE("an unknown ULTRASCOPE_SMALL_SGEMM is refused at startup", "[cpu][cli][errors][small_sgemm]") {
    expect_refused(tiny(), "ULTRASCOPE_SMALL_SGEMM=blas: use openblas", "ULTRASCOPE_SMALL_SGEMM=blas ");
}

TEST_CASE("parallel degrees beyond one rank are refused until launched with mpirun", "[cpu][cli][errors]") {
    expect_refused(tiny() + " --tp 2", "needs 2 ranks but 1 were started");
}

TEST_CASE("steps 0 with save writes the initial weights, and metrics-out writes one JSON line per step", "[cpu][cli]") {
    const std::string ckpt = temp_path("init.safetensors"), metrics = temp_path("metrics.jsonl");
    const ProcessResult r = run_process(bin("ultrascope-train") + " " + tiny() + " --steps 0 --quiet --save " + ckpt);
    REQUIRE(r.exit_code == 0);
    const auto f = us::SafetensorsFile::read(ckpt);
    CHECK(f.find("transformer.wte.weight") != nullptr);
    CHECK(f.find("transformer.h.1.mlp.c_proj.bias") != nullptr);
    CHECK(f.find("optimizer.exp_avg.transformer.wte.weight") == nullptr);  // no optimizer step yet
    CHECK(f.metadata_or("steps_done", "") == "0");

    const ProcessResult m =
        run_process(bin("ultrascope-train") + " " + tiny() + " --steps 3 --quiet --metrics-out " + metrics);
    REQUIRE(m.exit_code == 0);
    std::istringstream lines(read_file(metrics));
    std::string line;
    int count = 0;
    while (std::getline(lines, line)) {
        ++count;
        for (const char* key :
             {"\"step\"", "\"loss\"", "\"lr\"", "\"grad_norm\"", "\"tokens\"", "\"step_ms\"", "\"tokens_per_s\"",
              "\"mem_peak_bytes\"", "\"mem_peak_by_category\"", "\"activations\""})
            CHECK(line.find(key) != std::string::npos);
    }
    CHECK(count == 3);
}
