// The rank file of a captured rank (rank_writer.h): the raw trace's text copied as it is, value by value, so that
// nothing Kineto wrote is lost or re-encoded; the added keys come first, the added step spans last in traceEvents.
#include "profiler/capture/rank_writer.h"

#include <fmt/format.h>

#include "common/core/check.h"
#include "profiler/capture/trace_walk.h"
#include "profiler/import/byte_source.h"
#include "profiler/trace/text_output.h"

namespace us::capture {

namespace {

// Nanoseconds as Kineto writes microseconds: "1234.567".
std::string us_text(int64_t ns) {
    const char* sign = ns < 0 ? "-" : "";
    const uint64_t a = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
    return fmt::format("{}{}.{:03}", sign, a / 1000, a % 1000);
}

// Output gathered in pieces of about a MiB: the events arrive as many small texts.
class Chunked {
public:
    explicit Chunked(prof::TextOutput& out) : m_out(out) {}
    void add(std::string_view s) {
        m_buf.append(s);
        if (m_buf.size() > (size_t(1) << 20)) flush();
    }
    void flush() {
        m_out.write(m_buf);
        m_buf.clear();
    }

private:
    prof::TextOutput& m_out;
    std::string m_buf;
};

std::string step_event(const RawTrace& t, const CapturedRank& rank, size_t k, const TimeSpan& s) {
    const int64_t pid = t.step_pid ? t.step_pid : rank.pid, tid = t.step_tid ? t.step_tid : rank.pid;
    return fmt::format(
        R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": {}, "tid": {}, "ts": {}, )"
        R"("dur": {}, "args": {{"Derived from": "{}"}}}})",
        k + 1, pid, tid, us_text(s.begin), us_text(s.end - s.begin),
        k == 0 ? "capture start to end of Optimizer.step 1" : "end of the previous Optimizer.step to end of this one");
}

}  // namespace

nlohmann::json distributed_info_for(const RawTrace& trace, const CapturedRank& rank) {
    nlohmann::json d = trace.distributed_info.is_object() ? trace.distributed_info : nlohmann::json::object();
    if (!d.contains("rank")) d["rank"] = rank.rank;
    if (!d.contains("world_size")) d["world_size"] = rank.world_size;
    const std::string backend = rank.backend.empty() ? trace.backend : rank.backend;
    if (!d.contains("backend") && !backend.empty()) d["backend"] = backend;
    if (!d.contains("pg_config")) {
        nlohmann::json groups = nlohmann::json::array();
        std::vector<int> world(size_t(std::max(rank.world_size, 0)));
        for (size_t r = 0; r < world.size(); ++r) world[r] = int(r);
        groups.push_back({{"pg_name", "0"}, {"pg_desc", "default_pg"}, {"pg_size", rank.world_size}, {"ranks", world}});
        for (const KnownGroup& g : trace.groups) {
            if (g.name == "0") continue;
            nlohmann::json ranks = nlohmann::json::parse(g.ranks_json, nullptr, false);
            nlohmann::json item = {{"pg_name", g.name}, {"pg_desc", g.desc}};
            if (ranks.is_array()) item["ranks"] = ranks, item["pg_size"] = ranks.size();
            groups.push_back(item);
        }
        d["pg_count"] = groups.size();
        d["pg_config"] = groups;
    }
    return d;
}

void write_rank_file(const RawTrace& trace, const CapturedRank& rank, const std::vector<TimeSpan>& steps,
                     const std::string& path, bool gz) {
    prof::TextOutput file(path, gz);
    Chunked out(file);
    const nlohmann::json capture = {{"pid", rank.pid},
                                    {"host", rank.host},
                                    {"local_rank", rank.local_rank},
                                    {"raw_trace", rank.raw_trace},
                                    {"steps_from", trace.profiler_steps.empty() ? "Optimizer.step" : "ProfilerStep"}};
    out.add("{\n\"distributedInfo\": " + distributed_info_for(trace, rank).dump() + ",\n");
    out.add("\"ultrascopeCapture\": " + capture.dump());
    bool first_event = true;
    TraceWalker walker;
    walker.outer = [&](const std::string& key, std::string_view value) {
        if (key == "distributedInfo" || key == "ultrascopeCapture") return;  // written above
        out.add(",\n" + nlohmann::json(key).dump() + ": ");
        out.add(value);
    };
    walker.events_begin = [&] { out.add(",\n\"traceEvents\": [\n"); };
    walker.event = [&](std::string_view event) {
        if (!first_event) out.add(",\n");
        out.add(event);
        first_event = false;
    };
    walker.events_end = [&] {
        if (trace.profiler_steps.empty())
            for (size_t k = 0; k < steps.size(); ++k) {
                if (!first_event) out.add(",\n");
                out.add(step_event(trace, rank, k, steps[k]));
                first_event = false;
            }
        out.add("\n]");
    };
    walk_trace(*open_raw_trace(trace.path, trace.bytes), walker);
    out.add("\n}\n");
    out.flush();
    US_CHECK_INPUT(file.close(), "could not write '{}' (is the disk full?): free space and capture again", path);
}

}  // namespace us::capture
