// Pass one over a raw on-demand trace (raw_trace.h). Optimizer steps are the `Optimizer.step#<Class>.step`
// user annotations torch's optimizer wraps each step() in; Kineto counts its iterations with a hook on the same
// call, so one annotation is one of the ACTIVITIES_ITERATIONS it was asked for.
#include "profiler/capture/raw_trace.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/core/check.h"
#include "profiler/capture/trace_walk.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_event.h"

namespace us::capture {

namespace {

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

bool names_nccl(const std::string& name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return lower.find("nccl") != std::string::npos;
}

void note_event(RawTrace& t, const prof::KinetoEvent& e, int64_t& first_ts) {
    if (e.has_ts) first_ts = std::min(first_ts, e.ts_ns);
    const bool window_mark =
        (e.ph == 'X' && e.cat == "Trace") || ((e.ph == 'i' || e.ph == 'I') && starts_with(e.name, "Iteration Start"));
    if (window_mark && e.has_ts) {
        t.window_begin = t.has_window ? std::min(t.window_begin, e.ts_ns) : e.ts_ns;
        t.has_window = true;
    }
    if (!e.pg_name.empty() &&
        std::none_of(t.groups.begin(), t.groups.end(), [&](auto& g) { return g.name == e.pg_name; }))
        t.groups.push_back({e.pg_name, e.pg_desc, e.pg_ranks});
    if (t.backend.empty() && starts_with(e.name, "gloo:")) t.backend = "gloo";
    if (t.backend.empty() && (e.cat == "kernel" || e.cat == "user_annotation") && names_nccl(e.name))
        t.backend = "nccl";
    // The host's annotations only: a GPU trace repeats them on the streams (gpu_user_annotation), where they
    // would count every step twice.
    if (e.ph != 'X' || !e.has_ts || !e.has_dur || e.dur_ns < 0 || e.cat != "user_annotation") return;
    const TimeSpan span{e.ts_ns, e.ts_ns + e.dur_ns};
    if (starts_with(e.name, "Optimizer.step#")) {
        t.optimizer_steps.push_back(span);
        t.step_pid = e.pid_text ? 0 : e.pid, t.step_tid = e.tid_text ? 0 : e.tid;
    } else if (starts_with(e.name, "ProfilerStep#")) {
        t.profiler_steps.push_back(span);
    }
}

}  // namespace

RawTrace read_raw_trace(const std::string& path, const std::string* bytes) {
    RawTrace t;
    t.path = path, t.bytes = bytes;
    const std::unique_ptr<prof::ByteSource> raw = open_raw_trace(path, bytes);
    prof::ByteSource& source = *raw;
    prof::KinetoEvent event;
    std::string error;
    int64_t first_ts = INT64_MAX;
    TraceWalker walker;
    walker.outer = [&](const std::string& key, std::string_view text) {
        try {
            if (key == "distributedInfo") t.distributed_info = nlohmann::json::parse(text);
            if (key == "baseTimeNanoseconds") t.base_time_ns = nlohmann::json::parse(text).get<int64_t>();
        } catch (const nlohmann::json::exception& e) {
            fail_user("'{}': its '{}' is not what Kineto writes ({}): capture the job again", path, key, e.what());
        }
    };
    walker.event = [&](std::string_view text) {
        ++t.events;
        if (!prof::parse_kineto_event(text, event, error))
            fail_user("'{}' is not a readable Kineto trace: event {} of traceEvents: {}", path, t.events, error);
        note_event(t, event, first_ts);
    };
    walk_trace(source, walker);
    t.gzip = source.compressed();
    if (!t.has_window) t.window_begin = first_ts == INT64_MAX ? 0 : first_ts;
    auto by_begin = [](const TimeSpan& a, const TimeSpan& b) { return a.begin < b.begin; };
    std::sort(t.optimizer_steps.begin(), t.optimizer_steps.end(), by_begin);
    std::sort(t.profiler_steps.begin(), t.profiler_steps.end(), by_begin);
    return t;
}

bool raw_trace_complete(const std::string& path) {
    std::string tail;
    try {
        prof::ByteSource source(path);
        if (!source.compressed()) {  // the last KiB only
            std::FILE* f = std::fopen(path.c_str(), "rb");
            if (!f) return false;
            std::fseek(f, 0, SEEK_END);
            const long size = std::ftell(f);
            std::fseek(f, std::max(0L, size - 1024), SEEK_SET);
            tail.resize(size_t(std::min(size, 1024L)));
            tail.resize(std::fread(tail.data(), 1, tail.size(), f));
            std::fclose(f);
        } else {
            std::string piece(size_t(1) << 16, '\0');
            for (size_t n; (n = source.read(piece.data(), piece.size())) > 0;)
                tail = tail.substr(tail.size() > 1024 ? tail.size() - 1024 : 0) + piece.substr(0, n);
        }
    } catch (const UserError&) {
        return false;  // a gzip stream cut short: still being written
    }
    const size_t last = tail.find_last_not_of(" \t\r\n");
    if (last == std::string::npos || tail[last] != '}') return false;
    if (tail.rfind("\"traceName\"") != std::string::npos) return true;
    // Older Kineto ends with the "Record Window End" instant and "]}" (no traceName). A '}' cut inside an event
    // never has exactly that after the instant.
    const size_t mark = tail.rfind("\"Record Window End\"");
    const size_t close = mark == std::string::npos ? mark : tail.find('}', mark);
    if (close == std::string::npos) return false;
    std::string rest;
    for (size_t i = close + 1; i < tail.size(); ++i)
        if (!std::isspace(uint8_t(tail[i]))) rest += tail[i];
    return rest == "]}";
}

}  // namespace us::capture
