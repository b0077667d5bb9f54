// The headless `ultrascope` commands end to end: run (through mpirun), report, export and predict, and their
// answers to bad input. Also checks that a trace's memory agrees with what the trainer measured itself.
#include <sched.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

std::string data_file() { return sample_data_file("app-data.txt", 20000); }

std::string ultrascope() { return bin("ultrascope"); }

}  // namespace

TEST_CASE("ultrascope predict prints the formulas for a configuration", "[cpu][app]") {
    const ProcessResult r = run_process(ultrascope() + " predict --preset small");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("3225088 parameters") != std::string::npos);
    CHECK(r.output.find("MFLOP per token") != std::string::npos);
    const ProcessResult j = run_process(ultrascope() + " predict --preset small --precision bf16 --json");
    CHECK(j.exit_code == 0);
    const auto parsed = nlohmann::json::parse(j.output);
    CHECK(parsed[0]["memory_bytes"]["master_params"] == 4 * 3225088);
    const ProcessResult bad = run_process(ultrascope() + " predict --preset small --zero 7");
    CHECK(bad.exit_code != 0);
    CHECK(bad.output.find("unknown --zero stage 7") != std::string::npos);
}

TEST_CASE("ultrascope run launches through mpirun, writes a trace, and reports it", "[cpu][app]") {
    const std::string trace = temp_path("run.ustrace"), metrics = temp_path("run-metrics.jsonl");
    fs::remove(trace);
    const ProcessResult r = run_process(ultrascope() + " run -n 1 --trace " + trace +
                                        " --preset tiny --steps 4 --data " + data_file() + " --metrics-out " + metrics);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("Throughput (measured") != std::string::npos);
    REQUIRE(fs::exists(trace));

    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output);
    check_no_unexplained_misses(j);  // issue 32
    CHECK(j["world_size"] == 1);
    REQUIRE(j["ranks"].size() == 1);
    CHECK(j["ranks"][0]["status"] == "ok");
    CHECK(j["ranks"][0]["steps"].size() == 4);
    CHECK(j["throughput"]["tokens_per_s"].get<double>() > 0);
    // The trace's memory peaks are the allocator's own: the same as the trainer's metrics say.
    std::istringstream lines(read_file(metrics));
    std::string line;
    nlohmann::json peak_by_category = nlohmann::json::object();
    while (std::getline(lines, line)) {
        const auto m = nlohmann::json::parse(line);
        for (auto& [k, v] : m["mem_peak_by_category"].items())
            peak_by_category[k] = std::max(peak_by_category.value(k, int64_t(0)), v.get<int64_t>());
    }
    for (const char* c : {"params", "grads", "optimizer_state", "activations", "temporaries"})
        CHECK(j["ranks"][0]["memory_peak_bytes"][c] == peak_by_category[c]);
    CHECK(j["ranks"][0]["memory_predicted_bytes"]["params"] == j["ranks"][0]["memory_peak_bytes"]["params"]);

    const std::string chrome = temp_path("run.json");
    const ProcessResult ex = run_process(ultrascope() + " export " + trace + " --chrome " + chrome);
    CHECK(ex.exit_code == 0);
    CHECK(nlohmann::json::parse(read_file(chrome))["traceEvents"].size() > 100);

    // The run ends with the report `ultrascope report` prints on its trace (one builder): who holds the run back
    // first, then the run's figures.
    const ProcessResult text = run_process(ultrascope() + " report " + trace);
    REQUIRE(text.exit_code == 0);
    const size_t blame = text.output.find("Who holds the run back"), figures = text.output.find("\nRun: ");
    REQUIRE(blame != std::string::npos);
    REQUIRE(figures != std::string::npos);
    CHECK(r.output.find(text.output.substr(blame, figures - blame)) != std::string::npos);
}

TEST_CASE("ultrascope refuses bad input before launching anything", "[cpu][app][errors]") {
    const ProcessResult mismatch = run_process(ultrascope() + " run -n 3 --preset tiny --data " + data_file());
    CHECK(mismatch.exit_code != 0);
    CHECK(mismatch.output.find("-n 3 ranks, but the layout") != std::string::npos);
    const ProcessResult no_mpirun = run_process("ULTRASCOPE_MPIRUN=/nonexistent/mpirun " + ultrascope() +
                                                " run -n 1 --preset tiny --data " + data_file());
    CHECK(no_mpirun.exit_code != 0);
    CHECK(no_mpirun.output.find("cannot launch") != std::string::npos);
    const std::string junk = temp_path("junk.ustrace");
    write_file(junk, "definitely not a trace");
    const ProcessResult rep = run_process(ultrascope() + " report " + junk);
    CHECK(rep.exit_code == 2);
    CHECK(rep.output.find("not an Ultrascope trace") != std::string::npos);
    const ProcessResult unknown = run_process(ultrascope() + " frobnicate");
    CHECK(unknown.exit_code != 0);
    // run's own options go through CLI11: a count that is not one, a port out of range, a missing value
    for (const char* bad : {"-n abc", "-n 0", "--port 70000", "--trace"}) {
        const ProcessResult r = run_process(ultrascope() + " run --preset tiny --data " + data_file() + " " + bad);
        INFO(bad << ": " << r.output);
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("see ultrascope run --help") != std::string::npos);
    }
    // every command's flags the same way: a flag CLI11 refuses exits 2 and says where the help is
    for (const char* command :
         {"report", "diff", "export", "predict", "plan", "calibrate", "lesson", "capture", "agent", "nodes up"}) {
        const ProcessResult r = run_process(ultrascope() + " " + command + " --no-such-flag");
        INFO(command << ": " << r.output);
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("ultrascope: error:") != std::string::npos);
        CHECK(r.output.find("see ultrascope " + std::string(command) + " --help") != std::string::npos);
    }
    const ProcessResult port = run_process(ultrascope() + " agent --port 99999");
    CHECK(port.exit_code == 2);
    CHECK(port.output.find("--port") != std::string::npos);
    // a checkpoint rank 0 cannot write: every rank stops before the first step, with its message
    const ProcessResult save =
        run_process(ultrascope() + " run --dp 2 --preset tiny --steps 2 --data " + data_file() +
                    " --save /nonexistent/dir/x.safetensors --trace " + temp_path("refused-save.ustrace"));
    INFO(save.output);
    CHECK(save.exit_code != 0);
    CHECK(save.output.find("cannot write --save '/nonexistent/dir/x.safetensors'") != std::string::npos);
    CHECK(save.output.find("step 1/") == std::string::npos);
    const ProcessResult help = run_process(ultrascope() + " run --help");
    CHECK(help.exit_code == 0);
    CHECK(help.output.find("--store-cap-mib") != std::string::npos);
}

TEST_CASE("a rank killed mid-run: the others stop, the run fails, the trace up to the failure stays readable",
          "[cpu][app][failure]") {
    const std::string trace = temp_path("killed.ustrace");
    fs::remove(trace);
    const auto t0 = std::chrono::steady_clock::now();
    const ProcessResult r =
        run_process(ultrascope() + " run -n 2 --dp 2 --trace " + trace +
                    " --preset tiny --steps 100000 --fault-kill-step 20 --fault-kill-rank 1 --data " + data_file());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("lost rank 1") != std::string::npos);
    CHECK(r.output.find("process rank 1") != std::string::npos);  // mpirun names the rank that died
    CHECK(seconds < 60);  // a hang would be killed by ctest's timeout much later; the run stops within seconds
    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output);
    REQUIRE(j["ranks"].size() == 2);
    CHECK(j["ranks"][0]["steps"].size() >= 10);  // rank 0's steps before the failure are all there
    CHECK(j["ranks"][1]["status"].get<std::string>().rfind("lost", 0) == 0);
}

TEST_CASE("invalid layouts are rejected before any work starts", "[cpu][app][errors]") {
    const ProcessResult world = run_process(bin("ultrascope-train") + " --preset tiny --dp 2 --data " + data_file());
    CHECK(world.exit_code != 0);
    CHECK(world.output.find("needs 2 ranks but 1 were started") != std::string::npos);
    const ProcessResult batch =
        run_process(ultrascope() + " run -n 2 --dp 2 --preset tiny --batch 4 --global-batch 12 --data " + data_file());
    CHECK(batch.exit_code != 0);
    CHECK(batch.output.find("--global-batch 12 is not divisible by dp 2 x batch 4") != std::string::npos);
    const ProcessResult zero =
        run_process(ultrascope() + " run -n 2 --dp 2 --zero 4 --preset tiny --data " + data_file());
    CHECK(zero.exit_code != 0);
    CHECK(zero.output.find("unknown --zero stage 4") != std::string::npos);
    CHECK(zero.output.find("mpirun") == std::string::npos);  // nothing was launched
}

TEST_CASE("bad pipeline layouts are refused before launch, with what to change", "[cpu][app][errors][pipeline]") {
    struct Case {
        std::string flags, message;
    };
    for (const Case& c :
         {Case{"--pp 2 --pp-schedule gpipe", "unknown --pp-schedule 'gpipe'"},
          Case{"--pp 2 --pp-schedule interleaved --pp-chunks 2 --layers 4 --grad-accum 1", "to be a multiple of --pp"},
          Case{"--pp 2 --pp-schedule interleaved --pp-chunks 2 --layers 6 --grad-accum 2",
               "--layers 6 cannot be split evenly over pp 2 x 2 chunk(s)"},
          Case{"--pp 4 --layers 2", "--layers 2 cannot be split evenly over pp 4"},
          Case{"--pp 2 --zero 2 --dp 2", "pipelines compose with ZeRO-0 and ZeRO-1 only"},
          Case{"--pp 2 --pp-chunks 2", "needs --pp-schedule interleaved"}}) {
        const ProcessResult r = run_process(ultrascope() + " run --preset tiny " + c.flags + " --data " + data_file());
        INFO(c.flags << "\n" << r.output);
        CHECK(r.exit_code != 0);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK(r.output.find("mpirun") == std::string::npos);  // nothing was launched
    }
}

// [serial] (e2e_serial, alone): its bubble must match the prediction or be explained from the run's own evidence,
// and beside another test on two cores a 3-step tiny pipeline read 1.5 against 0.25 (another test's load: its
// ranks then wait for a core, which the misses do not weigh).
TEST_CASE("ultrascope run starts as many ranks as the layout needs, a pipeline reports its bubble",
          "[cpu][app][pipeline][serial]") {
    const std::string trace = temp_path("pp2.ustrace");
    fs::remove(trace);
    const ProcessResult r = run_process(ultrascope() + " run --pp 2 --grad-accum 4 --preset tiny --steps 3 --trace " +
                                        trace + " --data " + data_file());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("2 rank(s)") != std::string::npos);
    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output);
    check_no_unexplained_misses(j);  // issue 32
    CHECK(j["ranks"].size() == 2);
    CHECK(j["pipeline"]["bubble_fraction_formula"].get<double>() == Approx(0.25));
    CHECK(j["pipeline"]["bubble_fraction"].get<double>() > 0.0);
    // each rank's wait for a core over its steady steps, from the kernel (the machine's other load; Linux has it)
    for (const auto& rank : j["ranks"]) CHECK(rank["runqueue_wait_s"].get<double>() >= 0);
    // the machine the ranks shared: the threads `ultrascope run` gave them (cores / ranks, at least one) against the
    // CPUs this process may use (a test and its run share the machine and its mask)
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    if (!fs::exists("/proc/sys/kernel/random/boot_id")) return;  // the ranks could not say their machine
    REQUIRE(j["core_sharing"].size() == 1);
    const auto& machine = j["core_sharing"][0];
    const int threads = 2 * std::max(1, int(std::thread::hardware_concurrency()) / 2);
    CHECK(machine["ranks"] == nlohmann::json::array({0, 1}));
    CHECK(machine["cores"].get<int>() == CPU_COUNT(&set));
    CHECK(machine["threads"].get<int>() == threads);
    CHECK(machine["oversubscribed"].get<bool>() == (threads > CPU_COUNT(&set)));
    // the report from the ranks' digests (a large run's) says the same of the machine
    const ProcessResult from_digests = run_process(ultrascope() + " report " + trace + " --digests --no-cache --json");
    REQUIRE(from_digests.exit_code == 0);
    CHECK(nlohmann::json::parse(from_digests.output)["core_sharing"] == j["core_sharing"]);
    // the loss comes from the last stage and is the same on every rank's counters
    CHECK(j["ranks"][0]["micro_batches_in_flight"].get<int>() ==
          j["ranks"][0]["micro_batches_in_flight_predicted"].get<int>());
}

TEST_CASE("ultrascope run with ZeRO-3: the parameter gathers and reduce-scatters sent are the predicted walk's",
          "[cpu][app][zero]") {
    // several buckets (every unit its own with 0.05 MiB; all in one with 1 MiB), and two micro-batches, where a
    // bucket prefetched at the end of one backward serves the next forward
    for (const char* bucket : {"0.05", "1"}) {
        const std::string trace = temp_path("zero3.ustrace");
        fs::remove(trace);
        const ProcessResult r = run_process(ultrascope() + " run --dp 2 --zero 3 --grad-accum 2 --bucket-mb " + bucket +
                                            " --preset tiny --steps 3 --trace " + trace + " --data " + data_file());
        INFO("bucket " << bucket << " MiB\n" << r.output);
        REQUIRE(r.exit_code == 0);
        const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
        REQUIRE(rep.exit_code == 0);
        const auto j = nlohmann::json::parse(rep.output);
        check_no_unexplained_misses(j);  // issue 32
        for (const auto& rank : j["ranks"]) {
            CHECK(rank["comm_bytes"]["dp"].get<double>() > 0);
            CHECK(rank["comm_bytes"]["dp"].get<double>() == Approx(rank["comm_bytes_predicted"]["dp"].get<double>()));
        }
    }
}

// A review found the prediction counting fp32 bytes for ZeRO's bf16 collectives (ZeRO-1's all-gather, ZeRO-2 and 3's
// reduce-scatters of each micro-batch) under --fp32-grad-accum, and one transfer a micro-batch too few per chunk on an
// interleaved pipeline's first and last ranks: each was an unexplained miss of the report.
TEST_CASE("ultrascope run: fp32 gradient accumulation under ZeRO and an interleaved pipeline send the predicted bytes",
          "[cpu][app][zero][pipeline]") {
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"dp", "--dp 2 --zero 1 --precision bf16 --fp32-grad-accum --grad-accum 4"},
        {"dp", "--dp 2 --zero 2 --precision bf16 --fp32-grad-accum --grad-accum 4"},
        {"dp", "--dp 2 --zero 3 --precision bf16 --fp32-grad-accum --grad-accum 4"},
        {"pp", "--pp 2 --pp-schedule interleaved --pp-chunks 2 --layers 4 --grad-accum 4"}};
    for (const auto& [group, flags] : runs) {
        const std::string trace = temp_path("bytes.ustrace");
        fs::remove(trace);
        const ProcessResult r = run_process(ultrascope() + " run " + flags + " --preset tiny --steps 2 --trace " +
                                            trace + " --data " + data_file());
        INFO(flags << "\n" << r.output);
        REQUIRE(r.exit_code == 0);
        const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
        REQUIRE(rep.exit_code == 0);
        const auto j = nlohmann::json::parse(rep.output);
        check_no_unexplained_misses(j);
        for (const auto& rank : j["ranks"]) {
            CHECK(rank["comm_bytes"][group].get<double>() > 0);
            CHECK(rank["comm_bytes"][group].get<double>() == Approx(rank["comm_bytes_predicted"][group].get<double>()));
        }
    }
}

TEST_CASE("bad tensor-parallel layouts are refused before launch, with what to change", "[cpu][app][errors][tp]") {
    struct Case {
        std::string flags, message;
    };
    for (const Case& c : {Case{"--tp 3", "--heads 4 cannot be split over --tp 3"},
                          Case{"--sp", "--sp (sequence parallelism) works inside a tensor-parallel group"},
                          Case{"--tp 2 --sp --seq 31", "--seq 31 cannot be split over --tp 2 for --sp"},
                          Case{"-n 3 --tp 2", "-n 3 ranks, but the layout dp 1 x pp 1 x tp 2"}}) {
        const ProcessResult r = run_process(ultrascope() + " run --preset tiny " + c.flags + " --data " + data_file());
        INFO(c.flags << "\n" << r.output);
        CHECK(r.exit_code != 0);
        CHECK(r.output.find(c.message) != std::string::npos);
    }
}

TEST_CASE("ultrascope run with tp 2 and sp: tp collectives in the trace, comm bytes per group in the report",
          "[cpu][app][tp]") {
    const std::string trace = temp_path("tp2.ustrace");
    fs::remove(trace);
    const ProcessResult r = run_process(ultrascope() + " run --tp 2 --sp --preset tiny --steps 3 --trace " + trace +
                                        " --data " + data_file());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("2 rank(s)") != std::string::npos);
    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    REQUIRE(rep.exit_code == 0);
    const auto j = nlohmann::json::parse(rep.output);
    check_no_unexplained_misses(j);  // issue 32
    REQUIRE(j["ranks"].size() == 2);
    for (const auto& rank : j["ranks"]) {
        const double measured = rank["comm_bytes"]["tp"].get<double>();
        const double predicted = rank["comm_bytes_predicted"]["tp"].get<double>();
        CHECK(measured > 0);
        CHECK(measured == Approx(predicted).epsilon(1e-9));  // every tp collective of the engine, counted exactly
        CHECK(rank["comm_exposed_by_group_s"]["tp"].get<double>() > 0);
    }
}

TEST_CASE("bad context-parallel layouts are refused before launch", "[cpu][app][errors][cp]") {
    struct Case {
        std::string flags, message;
    };
    for (const Case& c :
         {Case{"--cp 2 --seq 30", "--seq 30 cannot be split over --cp 2 (zigzag): it needs 4 equal chunks"},
          Case{"--cp 3 --cp-balance contiguous --seq 32", "--seq 32 cannot be split over --cp 3"},
          Case{"--cp 2 --cp-balance striped", "unknown --cp-balance 'striped'"},
          Case{"--cp 2 --cp-comm allreduce", "unknown --cp-comm 'allreduce': expected ring or allgather"},
          Case{"-n 3 --cp 2", "-n 3 ranks, but the layout dp 1 x pp 1 x tp 1 x cp 2"}}) {
        const ProcessResult r = run_process(ultrascope() + " run --preset tiny " + c.flags + " --data " + data_file());
        INFO(c.flags << "\n" << r.output);
        CHECK(r.exit_code != 0);
        CHECK(r.output.find(c.message) != std::string::npos);
    }
}

TEST_CASE("bad mixture-of-experts layouts are refused before launch, with what to change", "[cpu][app][errors][moe]") {
    struct Case {
        std::string flags, message;
    };
    for (const Case& c :
         {Case{"-n 2 --dp 2 --ep 2 --moe-experts 3", "--moe-experts 3 cannot be split over --ep 2"},
          Case{"-n 2 --tp 2 --ep 2 --moe-experts 4", "--ep 2 must divide --dp 1"},
          Case{"-n 2 --dp 2 --ep 2", "--ep 2 needs experts to spread: add --moe-experts E"},
          Case{"--moe-experts 4 --moe-topk 5", "--moe-topk 5"},
          Case{"--moe-experts 4 --moe-capacity-factor -1", "--moe-capacity-factor must not be negative"},
          Case{"--moe-experts 4 --moe-aux-loss-coef -0.1", "--moe-aux-loss-coef must not be negative"},
          Case{"-n 2 --pp 2 --grad-accum 2 --pp-schedule zb1 --moe-experts 4",
               "--pp-schedule zb1 with mixture-of-experts"}}) {
        const ProcessResult r = run_process(ultrascope() + " run --preset tiny " + c.flags + " --data " + data_file());
        INFO(c.flags << "\n" << r.output);
        CHECK(r.exit_code != 0);
        CHECK(r.output.find(c.message) != std::string::npos);
    }
}

TEST_CASE("ultrascope run with experts: bytes per group as predicted, routing statistics in the report",
          "[cpu][app][moe]") {
    struct Case {
        std::string flags;
        bool ep;
    };
    for (const Case& c : {Case{"--dp 2", false}, Case{"--dp 2 --ep 2", true}}) {
        const std::string trace = temp_path("moe.ustrace");
        fs::remove(trace);
        const ProcessResult r = run_process(ultrascope() + " run " + c.flags +
                                            " --preset tiny --moe-experts 4 --moe-topk 2 --moe-aux-loss-coef 0.01 "
                                            "--steps 3 --trace " +
                                            trace + " --data " + data_file());
        INFO(c.flags << "\n" << r.output);
        REQUIRE(r.exit_code == 0);
        const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
        REQUIRE(rep.exit_code == 0);
        const auto j = nlohmann::json::parse(rep.output);
        check_no_unexplained_misses(j);  // issue 32
        REQUIRE(j["ranks"].size() == 2);
        for (const auto& rank : j["ranks"]) {
            // the blocks' and the experts' gradients (no other copy of a rank's experts under ep 2), the norm
            for (const char* group : {"dp", "edp", "world"})
                CHECK(rank["comm_bytes"].value(group, 0.0) == Approx(rank["comm_bytes_predicted"].value(group, 0.0)));
            CHECK((rank["comm_bytes"].value("edp", 0.0) > 0) == !c.ep);
            // Without ep every choice stays on the rank; with ep the walk takes the routing measured (the rows
            // the rank's experts received at the step with the most): either way the memory is exact.
            CHECK(rank["memory_peak_bytes"]["activations"] == rank["memory_predicted_bytes"]["activations"]);
            CHECK(rank["memory_peak_bytes"]["temporaries"] == rank["memory_predicted_bytes"]["temporaries"]);
            CHECK(rank["expert_load"].size() == (c.ep ? 2u : 0u));  // per model layer (tiny has 2)
            if (!c.ep) continue;
            // the all-to-alls follow the router: within a few percent of uniform routing on this small model
            const double measured = rank["comm_bytes"]["ep"].get<double>();
            const double predicted = rank["comm_bytes_predicted"]["ep"].get<double>();
            CHECK(measured > 0.75 * predicted);
            CHECK(measured < 1.25 * predicted);
            CHECK(rank["experts_s"].get<double>() > 0);
        }
        // every token's K choices of the global batch are counted, step by step, in every MoE layer
        const auto& experts = j["experts"];
        REQUIRE(experts.is_object());
        CHECK(experts["experts"] == 4);
        REQUIRE(experts["layers"].size() == 2);
        for (const auto& layer : experts["layers"]) {
            REQUIRE(layer["choices_per_expert"].size() == 3);
            for (const auto& step : layer["choices_per_expert"]) {
                double sum = 0;
                for (const auto& x : step) sum += x.get<double>();
                CHECK(sum == 2 * 4 * 32 * 2);  // dp x batch x seq x K
            }
            CHECK(layer["imbalance_mean"].get<double>() >= 1.0);
            CHECK(layer["dropped_fraction"].get<double>() == 0.0);  // dropless
        }
        CHECK(experts["balance"].size() == 3);
        CHECK(experts["balance"][0].get<double>() >= 1.0 - 1e-9);  // E sum f P is at least 1 (even routing)
    }
}

TEST_CASE(
    "ultrascope run with cp 2: the ring's and the all-gather's bytes measured equal the prediction, zigzag "
    "balances attention work",
    "[cpu][app][cp]") {
    struct Case {
        const char *balance, *comm, *precision;
    };
    for (const Case& k : {Case{"zigzag", "ring", "fp32"}, Case{"contiguous", "ring", "fp32"},
                          Case{"zigzag", "allgather", "fp32"}, Case{"zigzag", "allgather", "bf16"}}) {
        const std::string balance = k.balance, comm = k.comm, precision = k.precision;
        INFO(balance << ", " << comm << ", " << precision);
        const std::string trace = temp_path("cp2-" + balance + "-" + comm + "-" + precision + ".ustrace");
        fs::remove(trace);
        const ProcessResult r = run_process(ultrascope() + " run --cp 2 --cp-balance " + balance + " --cp-comm " +
                                            comm + " --precision " + precision + " --preset tiny --seq 64 --steps 3 " +
                                            "--trace " + trace + " --data " + data_file());
        INFO(r.output);
        REQUIRE(r.exit_code == 0);
        const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
        REQUIRE(rep.exit_code == 0);
        const auto j = nlohmann::json::parse(rep.output);
        check_no_unexplained_misses(j);  // issue 32
        REQUIRE(j["ranks"].size() == 2);
        for (const auto& rank : j["ranks"]) {
            CHECK(rank["comm_bytes"]["cp"].get<double>() > 0);
            CHECK(rank["comm_bytes"]["cp"].get<double>() == Approx(rank["comm_bytes_predicted"]["cp"].get<double>()));
            CHECK(rank["activations_peak_bytes"].get<int64_t>() == rank["activations_predicted_bytes"].get<int64_t>());
        }
        // The work, by the FLOPs the attention ops record (times are the machine's noise, not asserted): zigzag gives
        // both ranks the same pairs; contiguous gives the last rank both key blocks, the first only its diagonal.
        CHECK(j["context_parallel"]["attention_flops_max_over_min"].get<double>() ==
              Approx(std::string(balance) == "contiguous" ? 2.0 : 1.0));
    }
}
