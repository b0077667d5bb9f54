// The two walks of a Kineto trace (kineto_parse.h) read every committed real trace identically: whole with simdjson
// (what the reader does up to 128 MiB of JSON) and in pieces (larger traces, and every message about bad input).
// Field by field, span by span: a field the fast walk read differently would change every figure downstream.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_parse.h"

using namespace us::prof;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> committed_kineto_files() {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(US_TEST_DATA_DIR) / "kineto")) {
        const std::string name = e.path().filename().string();
        const bool trace =
            name.ends_with(".json.gz") || (name.ends_with(".json") && name.find("trace") != std::string::npos);
        if (e.is_regular_file() && trace && name.find("memory_timeline") == std::string::npos &&
            e.path().string().find(".ultrascope-digests") == std::string::npos)
            out.push_back(e.path().string());
    }
    return out;
}

KinetoFile read(const std::string& path, KinetoWalk walk) {
    ByteSource source(path);
    return parse_kineto(source, walk);
}

KinetoFile read_bytes(const std::string& bytes, KinetoWalk walk) {
    ByteSource source(bytes, "test input");
    return parse_kineto(source, walk);
}

void require_same(const KinetoFile& a, const KinetoFile& b) {
    REQUIRE(a.json_bytes == b.json_bytes);
    REQUIRE(a.events == b.events);
    REQUIRE(a.names == b.names);
    REQUIRE(a.threads == b.threads);
    REQUIRE(a.spans.size() == b.spans.size());
    for (size_t i = 0; i < a.spans.size(); ++i) {
        const KinetoSpan &x = a.spans[i], &y = b.spans[i];
        INFO("span " << i << " " << a.names[x.name]);
        REQUIRE(x.begin == y.begin);
        REQUIRE(x.end == y.end);
        REQUIRE(x.correlation == y.correlation);
        REQUIRE(x.stream == y.stream);
        REQUIRE(x.bytes == y.bytes);
        REQUIRE(x.name == y.name);
        REQUIRE(x.thread == y.thread);
        REQUIRE(x.step == y.step);
        REQUIRE(x.peer_src == y.peer_src);
        REQUIRE(x.peer_dst == y.peer_dst);
        REQUIRE(x.group == y.group);
        REQUIRE(x.cat == y.cat);
        REQUIRE(x.collective == y.collective);
    }
    REQUIRE(a.memory.size() == b.memory.size());
    for (size_t i = 0; i < a.memory.size(); ++i) {
        REQUIRE(a.memory[i].t == b.memory[i].t);
        REQUIRE(a.memory[i].allocated == b.memory[i].allocated);
        REQUIRE(a.memory[i].reserved == b.memory[i].reserved);
        REQUIRE(a.memory[i].cpu == b.memory[i].cpu);
    }
    REQUIRE(a.allocations.size() == b.allocations.size());
    for (size_t i = 0; i < a.allocations.size(); ++i) {
        REQUIRE(a.allocations[i].t_ns == b.allocations[i].t_ns);
        REQUIRE(a.allocations[i].bytes == b.allocations[i].bytes);
        REQUIRE(a.allocations[i].addr == b.allocations[i].addr);
        REQUIRE(a.allocations[i].device == b.allocations[i].device);
        REQUIRE(a.allocations[i].thread == b.allocations[i].thread);
    }
    REQUIRE(a.python_spans.size() == b.python_spans.size());
    REQUIRE(a.stream_rows.size() == b.stream_rows.size());
    for (size_t i = 0; i < a.stream_rows.size(); ++i) {
        REQUIRE(a.stream_rows[i].begin == b.stream_rows[i].begin);
        REQUIRE(a.stream_rows[i].stream == b.stream_rows[i].stream);
        REQUIRE(a.stream_rows[i].name == b.stream_rows[i].name);
    }
    REQUIRE(a.groups.size() == b.groups.size());
    for (size_t g = 0; g < a.groups.size(); ++g) {
        REQUIRE(a.groups[g].name == b.groups[g].name);
        REQUIRE(a.groups[g].desc == b.groups[g].desc);
        REQUIRE(a.groups[g].ranks_json == b.groups[g].ranks_json);
    }
    REQUIRE(a.base_time_ns == b.base_time_ns);
    REQUIRE(a.distributed_info == b.distributed_info);
    REQUIRE(a.device_properties == b.device_properties);
    REQUIRE(a.versions == b.versions);
    REQUIRE(a.python_functions == b.python_functions);
    REQUIRE(a.negative_durations == b.negative_durations);
    REQUIRE(a.bad_times == b.bad_times);
    REQUIRE(a.unknown_categories == b.unknown_categories);
}

}  // namespace

TEST_CASE("kineto: the whole walk (simdjson) reads every committed trace exactly as the walk in pieces",
          "[kineto][cpu]") {
    const std::vector<std::string> files = committed_kineto_files();
    REQUIRE(files.size() >= 40);  // our recordings, HTA's traces, the blame recordings
    size_t spans = 0;
    for (const std::string& path : files) {
        INFO(path);
        const KinetoFile whole = read(path, KinetoWalk::whole_when_it_fits);
        const KinetoFile pieces = read(path, KinetoWalk::in_pieces);
        require_same(whole, pieces);
        spans += whole.spans.size();
    }
    REQUIRE(spans > 100000);
}

TEST_CASE("kineto: input the whole walk cannot take is read in pieces, with the same result or the same message",
          "[kineto][cpu]") {
    const std::string event =
        R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5})";
    SECTION("not UTF-8 (simdjson refuses the document; the reader in pieces keeps the name with '?')") {
        const std::string bytes = R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "mm)"
                                  "\xff"
                                  R"(", "pid": 1, "tid": 2, "ts": 10, "dur": 5}]})";
        const KinetoFile f = read_bytes(bytes, KinetoWalk::whole_when_it_fits);
        REQUIRE(f.spans.size() == 1);
        require_same(f, read_bytes(bytes, KinetoWalk::in_pieces));
    }
    SECTION("a damaged event: the message names it as the reader in pieces does") {
        const std::string bytes = "{\"traceEvents\": [" + event + ", {\"ph\": \"X\", \"ts\": \"soon\"}]}";
        std::string whole_message, pieces_message;
        try {
            read_bytes(bytes, KinetoWalk::whole_when_it_fits);
        } catch (const us::UserError& e) {
            whole_message = e.what();
        }
        try {
            read_bytes(bytes, KinetoWalk::in_pieces);
        } catch (const us::UserError& e) {
            pieces_message = e.what();
        }
        REQUIRE_THAT(whole_message, Catch::Contains("event 2 of traceEvents") && Catch::Contains("'ts'"));
        REQUIRE(whole_message == pieces_message);
    }
    SECTION("concatenated gzip members are read whole, one after the other") {
        const std::string dir = (fs::temp_directory_path() / "ultrascope-walks").string();
        fs::create_directories(dir);
        const std::string a = dir + "/a.json", b = dir + "/b.json";
        { std::ofstream(a) << "{\"traceEvents\": [" << event << ","; }
        { std::ofstream(b) << event << "]}"; }
        REQUIRE(std::system(("gzip -kf " + a + " " + b + " && cat " + a + ".gz " + b + ".gz > " + dir + "/both.json.gz")
                                .c_str()) == 0);
        const KinetoFile f = read(dir + "/both.json.gz", KinetoWalk::whole_when_it_fits);
        REQUIRE(f.spans.size() == 2);
        require_same(f, read(dir + "/both.json.gz", KinetoWalk::in_pieces));
        fs::remove_all(dir);
    }
}
