// Every committed real PyTorch trace (our recordings and HTA's own test traces) through the report, as a user's
// first look would take them: each opens, no op-table row is named by an argument type, memory copies and sets are
// of kind memory, NCCL kernels are communication rather than op rows, and no engine-only figure of an imported run
// reads 0 (unknown is null).
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "profiler/analysis/imported_report.h"
#include "profiler/analysis/report.h"
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
