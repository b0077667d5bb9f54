// What changed between two runs, end to end, on regressions injected with a known answer: short engine runs (2-4
// ranks, a few seconds each) diffed with `ultrascope diff A B --json`. A slowed rank is the straggler on that rank; a
// naive attention against flash is compute (attention), its ops matched as replaced; the gradients' all-reduce after
// backward in one bucket (against small overlapped buckets) is more exposed dp communication; more micro-batches a
// smaller pipeline bubble; each with >= 90% of the step's change explained. A run against itself is no change; two
// runs of the same settings differ within their own noise or, where the machine slowed one, say so with no setting
// changed; a third run of them given as --repeat is the noise between runs, and a run of other settings is refused as
// one. Real PyTorch runs recorded before and after one change (a slowed rank, tests/data/kineto/blame) are diffed the
// same way; bad input is refused with a message. The engine runs' cases are [serial] (one ctest, e2e_serial, that runs
// alone): what they measure is the machine's, and a concurrent test on two cores turns a pipeline's handoffs into
// idle time larger than the bubble the schedule removes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

std::string data_file() { return sample_data_file("diff-data.txt", 20000); }

// One short engine run (its trace, written once per set of flags in this process).
std::string engine_run(const std::string& name, const std::string& flags) {
    static std::map<std::string, std::string> done;
    if (auto it = done.find(name); it != done.end()) return it->second;
    const std::string trace = temp_path("diff-" + name + ".ustrace");
    fs::remove(trace);
    const ProcessResult r = run_process(bin("ultrascope") + " run " + flags + " --hang-timeout 300 --trace " + trace +
                                        " --data " + data_file());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return done[name] = trace;
}

nlohmann::json diff_json(const std::string& a, const std::string& b) {
    const ProcessResult r = run_process(bin("ultrascope") + " diff " + a + " " + b + " --json");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output);
}

// The causes explain at least 90% of the step's change.
void check_explained(const nlohmann::json& d) {
    const double delta = d["delta_ms"], unexplained = d["unexplained_ms"];
    CHECK(std::abs(unexplained) <= 0.1 * std::abs(delta));
}

const std::string kDp = "--preset tiny --hidden 128 --seq 128 --batch 8 --steps 6 ";

}  // namespace

TEST_CASE("diff: a rank slowed 4x is the straggler, on that rank", "[cpu][app][diff][serial]") {
    const std::string a = engine_run("dp4", "--dp 4 " + kDp);
    const std::string b = engine_run("dp4-slow2", "--dp 4 " + kDp + "--slow-rank 2 --slow-factor 4");
    const nlohmann::json d = diff_json(a, b);
    INFO(d.dump(1));
    CHECK(d["delta_ms"].get<double>() > 0);
    // what B changed, from the runs' settings: the injected straggler
    REQUIRE(d["settings_changed"].size() == 2);
    CHECK(d["settings_changed"][0]["key"] == "slow_rank");
    CHECK(d["settings_changed"][0]["b"] == 2);
    CHECK(d["settings_changed"][1]["key"] == "slow_factor");
    // The others' waiting is the straggler's, on rank 2; the largest compute cause is rank 2's own (its injected
    // work). On a machine with fewer cores than ranks the slowed rank's work slows the others' compute too, so the
    // straggler is not always the first cause: it must be a large one.
    bool straggler = false, compute_on_2 = false;
    for (const auto& c : d["causes"]) {
        if (c["kind"] == "straggler" && c["evidence"]["rank"] == 2 &&
            c["ms"].get<double>() > 0.25 * d["delta_ms"].get<double>()) {
            straggler = true;
            CHECK(c["evidence"]["text"].get<std::string>().find("B's rank 2 arrived last") != std::string::npos);
        }
        // its injected work: an op new in B (the engine's op table is whole in its digest), or its gemm
        if ((c["kind"] == "new_ops" || c["kind"] == "compute") && !compute_on_2)
            compute_on_2 = c["evidence"]["rank"] == 2;
    }
    CHECK(straggler);
    CHECK(compute_on_2);
    bool injected = false;
    for (const auto& c : d["causes"])
        for (const auto& op : c["evidence"]["ops"])
            injected = injected || op["name"] == "injected slowdown (--slow-rank)";
    CHECK(injected);
    check_explained(d);
    CHECK(d["what_if"][0]["name"] == "without the straggler");
    CHECK(d["what_if"][0]["step_ms"].get<double>() < d["b_step_ms"].get<double>());
    // the text opens with the verdict
    const ProcessResult text = run_process(bin("ultrascope") + " diff " + a + " " + b);
    CHECK(text.output.rfind("B ", 0) == 0);
    CHECK((text.output.find("slower per step") != std::string::npos ||
           text.output.find("beyond noise") != std::string::npos));
}

TEST_CASE("diff: two runs of the same settings differ within their own noise", "[cpu][app][diff][serial]") {
    const std::string flags = "--dp 2 --preset tiny --hidden 128 --seq 128 --batch 8 --steps 8";
    const std::string a = engine_run("same-1", flags);
    const std::string b = engine_run("same-2", flags);
    // A run against itself: no change, nothing to explain, said so.
    const nlohmann::json self = diff_json(a, a);
    CHECK(self["delta_ms"].get<double>() == 0);
    CHECK(self["within_noise"] == true);
    CHECK(self["verdict"].get<std::string>().rfind("B does not differ from A beyond noise", 0) == 0);
    const nlohmann::json d = diff_json(a, b);
    INFO(d.dump(1));
    if (d["within_noise"].get<bool>()) {
        CHECK(d["verdict"].get<std::string>().rfind("B does not differ from A beyond noise", 0) == 0);
        return;
    }
    // A shared machine can run the same work slower for a whole run (twice, 74.6 and 99.7 ms a step here, each run
    // steady within 4 ms; or 42.3 against 38.9 ms, each within 2): then the diff says so, with no setting changed,
    // and its causes account for the change as measured (which of compute or exposed communication moved more is
    // the machine's doing, not a rule: a run whose all-reduce thread lost its core waits longer in it).
    WARN("two runs of the same settings differ beyond their noise on this machine: " << d["verdict"]);
    CHECK(d["verdict"].get<std::string>().rfind("B is ", 0) == 0);
    CHECK(d["settings_changed"] == nlohmann::json::array());
    REQUIRE(!d["causes"].empty());
    check_explained(d);
}

TEST_CASE("diff --repeat: another run of A's settings is the noise between runs, other settings are refused",
          "[cpu][app][diff][serial]") {
    const std::string flags = "--dp 2 --preset tiny --hidden 128 --seq 128 --batch 8 --steps 8";
    const std::string a = engine_run("same-1", flags), b = engine_run("same-2", flags);
    const std::string again = engine_run("same-3", flags);
    const ProcessResult r = run_process(bin("ultrascope") + " diff " + a + " " + b + " --repeat " + again + " --json");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json d = nlohmann::json::parse(r.output);
    CHECK(d["settings_changed"].empty());  // the same settings: known, and none differs
    REQUIRE(d["repeats"].size() == 1);
    CHECK(d["repeats"][0]["name"] == again);
    const double a_ms = d["a_step_ms"], again_ms = d["repeats"][0]["step_ms"];
    CHECK(d["noise_between_ms"].get<double>() == Approx(std::abs(again_ms - a_ms)));
    CHECK(d["noise_ms"].get<double>() ==
          Approx(std::max(d["noise_between_ms"].get<double>(), d["noise_within_ms"].get<double>())));
    CHECK(d["within_noise"] == (std::abs(d["delta_ms"].get<double>()) <= d["noise_ms"].get<double>() ||
                                std::abs(d["delta_ms"].get<double>()) <= 0.005 * a_ms));
    // the text says where its noise came from
    const ProcessResult text = run_process(bin("ultrascope") + " diff " + a + " " + b + " --repeat " + again);
    CHECK(text.output.find("A and its 1 repeat(s)") != std::string::npos);
    CHECK(text.output.find("settings changed: none") != std::string::npos);
    // A itself is not a repeat; nor is a run of other settings (tp 2 on the same two ranks)
    const ProcessResult self = run_process(bin("ultrascope") + " diff " + a + " " + b + " --repeat " + a);
    CHECK(self.exit_code != 0);
    CHECK(self.output.find("that is A itself") != std::string::npos);
    const ProcessResult self_b = run_process(bin("ultrascope") + " diff " + a + " " + b + " --repeat " + b);
    CHECK(self_b.exit_code != 0);
    CHECK(self_b.output.find("that is B itself") != std::string::npos);
    const std::string other = engine_run("same-tp", "--tp 2 --preset tiny --hidden 128 --seq 128 --batch 8 --steps 3");
    const ProcessResult wrong = run_process(bin("ultrascope") + " diff " + a + " " + b + " --repeat " + other);
    INFO(wrong.output);
    CHECK(wrong.exit_code != 0);
    CHECK(wrong.output.find("not a run of A's settings (") != std::string::npos);
    CHECK(wrong.output.find("dp 2 -> 1") != std::string::npos);
}

TEST_CASE("diff: a naive attention against flash is compute (attention), its ops matched as replaced",
          "[cpu][app][diff][serial]") {
    const std::string flags = "--dp 2 --preset tiny --hidden 64 --seq 512 --batch 2 --steps 5 ";
    const std::string a = engine_run("flash", flags + "--attention flash");
    const std::string b = engine_run("naive", flags + "--attention naive");
    const nlohmann::json d = diff_json(a, b);
    INFO(d.dump(1));
    // On a CPU the two cost about the same (docs/performance.md): the attention cause is there with its ops, new in
    // B and gone from A, whether or not the step moved beyond noise; where it did, attention is the first cause.
    const nlohmann::json* attention = nullptr;
    for (const auto& c : d["causes"])
        if (c["kind"] == "compute" && c["what"] == "attention") attention = &c;
    REQUIRE(attention);
    bool added = false, removed = false;
    for (const auto& op : (*attention)["evidence"]["ops"])
        added = added || op["match"] == "new", removed = removed || op["match"] == "gone";
    CHECK(added);
    CHECK(removed);
    // Which cause comes first is the shared machine's say here (the gemms move by more than attention under load,
    // and once failed this test in a full ctest): said, not checked.
    if (!d["within_noise"].get<bool>() && d["causes"][0]["what"] != "attention")
        WARN("beyond noise, but the first cause is " << d["causes"][0]["kind"] << " " << d["causes"][0]["what"]);
    check_explained(d);
}

TEST_CASE("diff: gradients all-reduced after backward (no overlap, one bucket) are more exposed dp communication",
          "[cpu][app][diff][serial]") {
    // Gradients of 100 MB (hidden 512, 8 layers) against little compute (seq 32, batch 2): the all-reduce after
    // backward is then 50-150 ms of exposed dp communication here, where the waits an overlapped run's ranks do for
    // each other (two ranks and their progress on two cores) move by about 1 ms. With 13 MB (hidden 256, 4 layers)
    // those waits (15.6 ms in one pair) outgrew the all-reduce, and the first cause was the straggler's.
    const std::string flags = "--dp 2 --preset tiny --hidden 512 --layers 8 --seq 32 --batch 2 --steps 6 ";
    const std::string a = engine_run("dp2-overlap", flags + "--bucket-mb 0.25");
    const std::string b = engine_run("dp2-no-overlap", flags + "--bucket-mb 64 --no-overlap");
    const nlohmann::json d = diff_json(a, b);
    INFO(d.dump(1));
    // Whether the step itself got slower is the machine's say: on two cores the overlapped all-reduce's progress
    // slows backward's GEMMs by about what it hides (+35 ms of exposed dp communication against -40 ms of gemm in
    // one pair), so the step moves within noise either way. What must hold is where the time went.
    if (d["delta_ms"].get<double>() <= 0) WARN("B (no overlap) was not slower per step: " << d["verdict"]);
    // The first cause that is not compute (whose time a shared machine moves between runs of the same work) is the
    // exposed dp communication, grown.
    const nlohmann::json* first = nullptr;
    for (const auto& c : d["causes"])
        if (!first && c["kind"] != "compute") first = &c;
    REQUIRE(first);
    CHECK((*first)["kind"] == "exposed_comm");
    CHECK((*first)["what"] == "dp");
    CHECK((*first)["ms"].get<double>() > 0);
    check_explained(d);
}

TEST_CASE("diff: more micro-batches are a smaller pipeline bubble", "[cpu][app][diff][serial]") {
    const std::string flags = "--pp 2 --preset tiny --layers 4 --hidden 128 --seq 128 --steps 5 ";
    // One micro-batch against eight: half of each stage's step is bubble against a ninth, -58 to -84 ms a step on
    // a quiet machine here (two against eight moved it by -26 ms, which a busy core's handoffs can undo).
    const std::string a = engine_run("pp2-m1", flags + "--batch 16 --grad-accum 1");
    const std::string b = engine_run("pp2-m8", flags + "--batch 2 --grad-accum 8");
    const nlohmann::json d = diff_json(a, b);
    INFO(d.dump(1));
    bool bubble = false;
    for (const auto& c : d["causes"])
        if (c["kind"] == "bubble") {
            bubble = true;
            CHECK(c["ms"].get<double>() < 0);
        }
    CHECK(bubble);
    check_explained(d);
}

TEST_CASE("diff: real PyTorch runs before and after a rank was slowed", "[cpu][app][diff]") {
    const std::string a = copy_kineto_run("blame/ddp_no_culprit", "diff-kineto-before");
    const std::string b = copy_kineto_run("blame/ddp_slow_rank", "diff-kineto-after");
    const nlohmann::json d = diff_json(a, b);
    INFO(d.dump(1));
    CHECK(d["delta_ms"].get<double>() > 0);
    bool straggler = false;
    for (const auto& c : d["causes"])
        if (c["kind"] == "straggler" && c["evidence"]["rank"] == 2) straggler = c["ms"].get<double>() > 0;
    CHECK(straggler);
    check_explained(d);
}

TEST_CASE("diff: bad input is refused with a message and a non-zero exit", "[cpu][app][diff]") {
    const ProcessResult missing = run_process(bin("ultrascope") + " diff /nonexistent/a.ustrace /nonexistent/b");
    CHECK(missing.exit_code != 0);
    CHECK(missing.output.find("A (/nonexistent/a.ustrace): no such file or folder") != std::string::npos);
    const std::string junk = temp_path("diff-junk.ustrace");
    write_file(junk, "not a trace");
    const std::string a = copy_kineto_run("blame/ddp_no_culprit", "diff-kineto-junk");
    const ProcessResult bad = run_process(bin("ultrascope") + " diff " + a + " " + junk);
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("B (" + junk + ")") != std::string::npos);
    // A trace cut off before its second step: the refusal says what the reader found (it said only "no steady step")
    const std::string whole = std::string(US_TEST_DATA_DIR) + "/cpu/afab-pp1-tp2-tiny.ustrace";
    REQUIRE(fs::exists(whole));
    std::ifstream in(whole, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = temp_path("diff-cut.ustrace");
    write_file(cut, bytes.substr(0, 3000));
    const ProcessResult truncated = run_process(bin("ultrascope") + " diff " + whole + " " + cut);
    INFO(truncated.output);
    CHECK(truncated.exit_code == 2);
    CHECK(truncated.output.find("the reader said of " + cut) != std::string::npos);
    CHECK(truncated.output.find("ends inside chunk") != std::string::npos);
}
