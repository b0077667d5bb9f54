// Every committed real PyTorch trace (our recordings and HTA's own test traces) through the report, as a user's
// first look would take them: each opens, no op-table row is named by an argument type, memory copies and sets are
// of kind memory, NCCL kernels are communication rather than op rows, and no engine-only figure of an imported run
// reads 0 (unknown is null).
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <unistd.h>

#include "common/core/check.h"
#include "profiler/analysis/imported_report.h"
#include "profiler/analysis/report.h"
#include "profiler/import/one_run.h"
#include "profiler/import/run_files.h"
#include "profiler/trace/trace_store.h"

using namespace us::prof;
namespace fs = std::filesystem;

namespace {

// The folders holding a run: those with trace files directly inside (a torchtitan iteration folder included).
std::vector<std::string> real_trace_folders() {
    std::set<std::string> out;
    const fs::path root = fs::path(US_TEST_DATA_DIR) / "kineto";
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        const std::string name = e.path().filename().string();
        const bool trace =
            name.ends_with(".json.gz") || (name.ends_with(".json") && name.find("trace") != std::string::npos);
        if (e.is_regular_file() && trace && name.find("memory_timeline") == std::string::npos &&
            e.path().string().find(".ultrascope-digests") == std::string::npos)
            out.insert(e.path().parent_path().string());
    }
    return {out.begin(), out.end()};
}

// A shown name made of an argument's type, as the old shortening gave ("Params)", "Array<char*, 3>)",
// "nchw2nhwc_params_t<...>", "{lambda(int)#1})", "GenericPackedTensorAccessor<...>").
bool argument_like(const std::string& shown) {
    static const std::regex bad(
        R"(^Params|^Array<|_params_t|^\{lambda|^GenericPackedTensorAccessor|^ncclDevKernelArgs)");
    const auto count = [&](char c) { return std::count(shown.begin(), shown.end(), c); };
    return std::regex_search(shown, bad) || count(')') > count('(');  // the tail of a parameter list
}

}  // namespace

TEST_CASE("every committed real trace reports readable kernel names, right kinds, and unknown as null",
          "[cpu][kineto][kernel-names]") {
    const std::vector<std::string> folders = real_trace_folders();
    REQUIRE(folders.size() >= 25);  // our recordings and HTA's test traces
    size_t device_rows = 0, memory_rows = 0;
    for (const std::string& folder : folders) {
        INFO(folder);
        TraceStore store;
        std::vector<KinetoMemoryEvents> memory;
        REQUIRE_NOTHROW(load_run({folder}, store, &memory));
        REQUIRE(store.rank_count() > 0);
        nlohmann::json j = report_json(build_report(store));
        REQUIRE(j["imported"].is_object());
        mark_imported_unknowns(j, store);  // as `ultrascope report --json` writes it
        for (const auto& rank : j["ranks"]) {
            // what the trace cannot know is null, never 0
            for (const char* k : {"activations_peak_bytes", "memory_peak_bytes", "comm_by_group_s"})
                CHECK(rank[k].is_null());
            // the profiler's times, never said to be the engine's
            CHECK((rank["time_source"] == "device" || rank["time_source"] == "kineto"));
            for (const auto& row : rank["ops"]["rows"]) {
                const std::string name = row["name"], shown = row["short_name"], kind = row["kind"];
                INFO(name << " -> " << shown << " (" << kind << ")");
                CHECK_FALSE(shown.empty());
                CHECK_FALSE(argument_like(shown));
                if (!rank["ops"]["device_kernels"].get<bool>()) continue;
                ++device_rows;
                if (name.rfind("Memcpy", 0) == 0 || name.rfind("Memset", 0) == 0) {
                    CHECK(kind == "memory");
                    ++memory_rows;
                }
                // NCCL kernels are communication spans (the comm lanes, the groups' figures), never op rows
                CHECK(name.rfind("nccl", 0) == std::string::npos);
            }
        }
    }
    // the sweep saw GPU traces with copies
    CHECK(device_rows > 100);
    CHECK(memory_rows > 0);
}

TEST_CASE("one rank's file of a two-rank PyTorch run: the report names the rank whose file is missing",
          "[cpu][kineto]") {
    const fs::path dir = fs::temp_directory_path() / ("ultrascope-test-one-rank-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path ddp = fs::path(US_TEST_DATA_DIR) / "kineto" / "ddp";
    fs::copy_file(ddp / "vm_20224.1795526751000576243.pt.trace.json.gz", dir / "rank1.pt.trace.json.gz");
    TraceStore store;
    load_run({dir.string()}, store, nullptr);
    const Report rep = build_report(store);
    std::string said;
    for (const std::string& w : rep.warnings) said += w + "\n";
    INFO(said);
    CHECK(said.find("the files say a world of 2 ranks but hold 1: no file for rank 0.") != std::string::npos);
    // the whole run, both files: nothing missing
    TraceStore whole;
    load_run({ddp.string()}, whole, nullptr);
    for (const std::string& w : build_report(whole).warnings) CHECK(w.find("no file for rank") == std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("rank files of one host that profiled 30 s apart read with a warning naming both ranks", "[cpu][kineto]") {
    // rank 0 of the DDP recording and rank 1 of the FSDP2 one: both on host 'vm', 30 s apart (under a minute: one
    // run whose ranks profiled different steps, as a capture armed a poll apart leaves them)
    const fs::path dir = fs::temp_directory_path() / ("ultrascope-test-two-runs-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path data = fs::path(US_TEST_DATA_DIR) / "kineto";
    fs::copy_file(data / "ddp" / "vm_20223.1795526751102024081.pt.trace.json.gz", dir / "rank0.pt.trace.json.gz");
    fs::copy_file(data / "fsdp2" / "rank-1.json.gz", dir / "rank1.pt.trace.json.gz");
    TraceStore store;
    std::string said;
    for (const std::string& w : load_run({dir.string()}, store, nullptr)) said += w + "\n";
    INFO(said);
    CHECK(said.find("rank 0 and rank 1 ran on one host ('vm') but their traces do not overlap") != std::string::npos);
    CHECK(said.find("so they profiled different steps") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("one run: ranks on one host must overlap in time, ranks on other hosts or unknown ones are not compared",
          "[cpu][kineto]") {
    const int64_t s = 1'000'000'000;
    // Three ranks of one run on host a (each overlapping the one that ends last so far), one on host b much later.
    std::vector<RankWindow> w = {{0, "a", 0, 10 * s},
                                 {1, "a", 1 * s, 4 * s},
                                 {2, "a", 9 * s, 12 * s},
                                 {3, "b", 100 * s, 110 * s},
                                 {4, "", 500 * s, 501 * s}};
    CHECK(first_not_one_run(w).said.empty());
    // A rank on host a that begins a second after every other rank of a has ended: one run's ranks that profiled
    // different steps (a warning) ...
    w.push_back({5, "a", 13 * s, 14 * s});
    const OneRunCheck check_apart = first_not_one_run(w);
    const std::string& apart = check_apart.said;
    CHECK_FALSE(check_apart.two_runs);
    CHECK(apart.find("rank 2 and rank 5 ran on one host ('a') but their traces do not overlap") != std::string::npos);
    CHECK(apart.find("1.000 s before") != std::string::npos);
    // ... and one that begins minutes after: another run's, refused, even with the warning's pair met first.
    w.push_back({6, "a", 300 * s, 301 * s});
    const OneRunCheck check_two = first_not_one_run(w);
    const std::string& why = check_two.said;
    CHECK(check_two.two_runs);
    CHECK(why.find("rank 5 and rank 6 ran on one host ('a') but at different times") != std::string::npos);
    CHECK(why.find("286.000 s before") != std::string::npos);
}

TEST_CASE("a folder of several profiler cycles per rank opens each rank's newest cycle, and says so", "[cpu][kineto]") {
    const fs::path dir = fs::temp_directory_path() / ("ultrascope-test-cycles-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path ddp = fs::path(US_TEST_DATA_DIR) / "kineto" / "ddp";
    // tensorboard_trace_handler's names: <host>_<pid>.<time ns>.pt.trace.json.gz, one file a cycle
    for (const char* time : {"1795526751000000001", "1795526759000000002"}) {
        fs::copy_file(ddp / "vm_20223.1795526751102024081.pt.trace.json.gz",
                      dir / (std::string("vm_20223.") + time + ".pt.trace.json.gz"));
        fs::copy_file(ddp / "vm_20224.1795526751000576243.pt.trace.json.gz",
                      dir / (std::string("vm_20224.") + time + ".pt.trace.json.gz"));
    }
    const RunFiles run = find_run_files({dir.string()});
    REQUIRE(run.files.size() == 2);
    for (const std::string& f : run.files) CHECK(f.find(".1795526759000000002.") != std::string::npos);
    REQUIRE(!run.warnings.empty());
    CHECK(run.warnings.front().find("up to 2 profiled cycles per rank") != std::string::npos);
    TraceStore store;
    CHECK_NOTHROW(load_run({dir.string()}, store, nullptr));  // one cycle: no rank claimed twice
    CHECK(store.ranks().size() == 2);
    fs::remove_all(dir);
}

TEST_CASE("DDP on gloo: the buckets' bytes come from gloo's spans where the c10d op's TensorList says none",
          "[cpu][kineto]") {
    TraceStore store;
    load_run({(fs::path(US_TEST_DATA_DIR) / "kineto" / "ddp").string()}, store, nullptr);
    const Report rep = build_report(store);
    REQUIRE(rep.ranks.size() == 2);
    for (const RankReport& r : rep.ranks) {
        INFO(r.label);
        // one bucket of 137216 floats a step (the trace's gloo:all_reduce), counted once
        CHECK(per_steady_step(r, r.steady.group_bytes[size_t(GroupKind::world)]) == Approx(137216.0 * 4));
    }
}
