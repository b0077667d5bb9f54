#include "profiler/trace/kineto_export.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "common/core/check.h"
#include "common/core/output_file.h"
#include "profiler/trace/launch_times.h"
#include "profiler/trace/text_output.h"
#include "profiler/transport/rank_metadata.h"
#include "profiler/trace/run_info.h"

namespace us::prof {

namespace {

// Kineto's microseconds, written from integer nanoseconds so that no digit is lost to a double.
std::string us_text(int64_t ns) {
    const bool negative = ns < 0;
    const uint64_t a = negative ? uint64_t(-(ns + 1)) + 1 : uint64_t(ns);
    return fmt::format("{}{}.{:03d}", negative ? "-" : "", a / 1000, int(a % 1000));
}

int64_t floor_us(int64_t ns) { return (ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000)) * 1000; }

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

std::string nccl_dtype(const RankTrace& rt) {
    const std::optional<nlohmann::json>& settings = rt.info.settings;
    const std::string p = settings ? settings->value("precision", std::string("fp32")) : std::string("fp32");
    return p == "bf16" ? "bf16" : p == "fp16" ? "f16" : "f32";
}

// The CUDA stream number of a stream slot: CUPTI's (metadata cupti.streams, [context, stream] pairs) on engine
// traces, the trace's own (metadata streams, by slot) on imported ones, else the slot itself.
int64_t stream_number(const RankTrace& rt, uint8_t slot) {
    const nlohmann::json streams =
        rt.info.cupti ? rt.info.cupti->value("streams", nlohmann::json::array()) : nlohmann::json::array();
    if (streams.is_array() && slot < streams.size() && streams[slot].is_array() && streams[slot].size() == 2 &&
        streams[slot][1].is_number_integer())
        return streams[slot][1].get<int64_t>();
    const nlohmann::json& imported = rt.info.stream_ids;
    if (imported.is_array() && slot < imported.size() && imported[slot].is_number_integer())
        return imported[slot].get<int64_t>();
    return slot;
}

struct DeviceEvent {
    std::string cat, name, launch;  // Kineto category, its name, the cuda_runtime call that launched it
};

DeviceEvent device_event(const TraceStore& store, const RankTrace& rt, const Span& s, Lane lane) {
    const std::string& name = store.name(s.name);
    if (lane == Lane::device_comm) {
        const bool ncclish = name.rfind("nccl", 0) == 0 && name.find("Kernel") != std::string::npos;
        return {"kernel", ncclish ? name : nccl_kernel_name(s.op, nccl_dtype(rt)), "cudaLaunchKernel"};
    }
    if (name.rfind("memcpy", 0) == 0 || name.rfind("Memcpy", 0) == 0)
        return {"gpu_memcpy", "Memcpy" + name.substr(6), "cudaMemcpyAsync"};
    if (name.rfind("memset", 0) == 0 || name.rfind("Memset", 0) == 0)
        return {"gpu_memset", "Memset (Device)", "cudaMemsetAsync"};
    return {"kernel", name, "cudaLaunchKernel"};
}

std::string cpu_category(const TraceStore& store, const Span& s) {
    const std::string& name = store.name(s.name);
    if (s.kind == SpanKind::op || s.kind == SpanKind::comm) return "cpu_op";
    if (s.kind == SpanKind::wait && name.rfind("cuda", 0) == 0) return "cuda_runtime";
    return "user_annotation";
}

// Where the rank's steps begin: a kernel's step when its launch is not known.
struct StepBegins {
    std::map<int, int64_t> by_step;
    int64_t last = INT64_MIN;
};

// Steps as torch.profiler marks them; the engine counts from 1, Kineto from 0.
template <typename Emit>
StepBegins emit_steps(const RankTrace& rt, int host_pid, Emit& emit) {
    StepBegins begins;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::step) {
            begins.by_step[s.step] = s.begin;
            begins.last = std::max(begins.last, s.begin);
            emit(fmt::format(
                R"({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":{},"tid":1,"ts":{},"dur":{},"args":{{"External id":0}}}})",
                s.step - 1, host_pid, us_text(s.begin), us_text(s.duration())));
        }
    return begins;
}

// The host's spans: ops (on a GPU their launches, on a CPU the compute), annotations, collectives.
template <typename Emit>
void emit_host_spans(const TraceStore& store, const RankTrace& rt, int host_pid, Emit& emit) {
    for (Lane lane : {Lane::host, Lane::compute, Lane::comm, Lane::p2p})
        for (const Span& s : rt.lanes[size_t(lane)].spans()) {
            if (s.kind == SpanKind::step) continue;
            const int tid = lane == Lane::comm || lane == Lane::p2p ? 1000 + int(lane) : 1 + s.thread;
            const std::string& name = store.name(s.name);
            emit(fmt::format(
                R"({{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"External id":0,"step":{},"lane":"{}","layer":{},"micro_batch":{}{}}}}})",
                cpu_category(store, s), quoted(name), host_pid, tid, us_text(s.begin), us_text(s.duration()), s.step,
                kLaneNames[size_t(lane)], s.layer, s.micro_batch,
                s.kind == SpanKind::comm
                    ? fmt::format(",\"Collective name\":\"{}\",\"bytes\":{}{}", kOpClassNames[size_t(s.op)], s.bytes,
                                  s.peer >= 0 ? fmt::format(",\"peer\":{}", s.peer) : "")
                    : std::string()));
        }
}

// Every kernel, memcpy and memset with its launch (a runtime call and the device event, joined by a correlation
// id), stream by stream: the launch inferred from the launching op on engine traces; where none is known, at the
// latest time that does not claim the host was late (before the stream's previous work ended, never before the
// kernel's step began).
template <typename Emit>
void emit_device_work(const TraceStore& store, const RankTrace& rt, int host_pid, const StepBegins& steps, Emit& emit) {
    const int device = 0;  // the rank's GPU, as torch.profiler numbers it for a process that uses one
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":"GPU {}"}}}})", device,
                     device));
    const LaunchTimes launches = launch_times(store, rt.rank);
    struct Ref {
        const Span* s;
        Lane lane;
        int64_t launch;
    };
    std::map<int, std::vector<Ref>> by_stream;
    for (Lane lane : {Lane::device, Lane::device_comm}) {
        const auto& spans = rt.lanes[size_t(lane)].spans();
        const auto& launch = lane == Lane::device ? launches.device : launches.device_comm;
        for (size_t i = 0; i < spans.size(); ++i) by_stream[spans[i].thread].push_back({&spans[i], lane, launch[i]});
    }
    int64_t correlation = 0;
    for (auto& [slot, refs] : by_stream) {
        std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) { return a.s->begin < b.s->begin; });
        const int64_t stream = stream_number(rt, uint8_t(slot));
        int64_t previous_end = INT64_MIN;
        for (const Ref& r : refs) {
            const Span& s = *r.s;
            const DeviceEvent e = device_event(store, rt, s, r.lane);
            int64_t launch = r.launch;
            const char* launch_from = "the launching op's begin on the host (inferred)";
            if (launch == INT64_MIN) {
                launch_from = "not recorded: placed not to claim a host wait";
                launch = floor_us(std::min(s.begin, previous_end == INT64_MIN ? s.begin : previous_end));
                const auto step = steps.by_step.find(s.step);
                if (step != steps.by_step.end())
                    launch = std::max(launch, step->second);
                else if (s.begin >= steps.last)
                    launch = std::max(launch, steps.last);
            }
            previous_end = std::max(previous_end, s.end);
            ++correlation;
            emit(fmt::format(
                R"({{"ph":"X","cat":"cuda_runtime","name":"{}","pid":{},"tid":1,"ts":{},"dur":0.000,"args":{{"External id":{},"correlation":{},"launch_time":"{}"}}}})",
                e.launch, host_pid, us_text(launch), correlation, correlation, launch_from));
            std::string extra;
            if (s.bytes > 0) extra += fmt::format(",\"bytes\":{}", s.bytes);
            if (r.lane == Lane::device_comm)
                extra += fmt::format(",\"Collective name\":\"{}\"", kOpClassNames[size_t(s.op)]);
            emit(fmt::format(
                R"({{"ph":"X","cat":"{}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"External id":{},"device":{},"stream":{},"correlation":{},"step":{}{}}}}})",
                e.cat, quoted(e.name), device, stream, us_text(s.begin), us_text(s.duration()), correlation, device,
                stream, correlation, s.step, extra));
        }
    }
}

// Streams the rank's events to `emit`, one JSON object each: its process, steps and host spans, then its GPU's work.
template <typename Emit>
void rank_events(const TraceStore& store, const RankTrace& rt, Emit&& emit) {
    const int host_pid = rt.info.pid.value_or(100000 + rt.rank);
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":"rank {} host"}}}})",
                     host_pid, rt.rank));
    const StepBegins steps = emit_steps(rt, host_pid, emit);
    emit_host_spans(store, rt, host_pid, emit);
    if (rt.has_device_spans()) emit_device_work(store, rt, host_pid, steps, emit);
}

nlohmann::json device_properties(const RankTrace& rt) {
    if (rt.imported()) return imported_run_info(rt).devices;  // the importer's, as its run description holds them
    nlohmann::json d = {{"id", 0}};
    if (const std::string name = rt.info.device; !name.empty()) d["name"] = name;
    return nlohmann::json::array({d});
}

}  // namespace

std::string nccl_kernel_name(OpClass op, const std::string& dtype) {
    const std::string args = "(ncclDevKernelArgsStorage<4096ul>)";
    switch (op) {
        case OpClass::reduce_scatter:
            return "ncclDevKernel_ReduceScatter_Sum_" + dtype + "_RING_LL" + args;
        case OpClass::all_gather:
            return "ncclDevKernel_AllGather_RING_LL" + args;
        case OpClass::broadcast:
            return "ncclDevKernel_Broadcast_RING_LL" + args;
        case OpClass::send:
        case OpClass::recv:
        case OpClass::all_to_all:
            return "ncclDevKernel_SendRecv" + args;  // NCCL runs these as send/recv
        default:
            return "ncclDevKernel_AllReduce_Sum_" + dtype + "_RING_LL" + args;  // a barrier is an all-reduce
    }
}

std::vector<std::string> export_kineto_traces(const TraceStore& store, const std::string& dir, bool gz) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    US_CHECK_INPUT(!ec, "cannot create the folder '{}': {}", dir, ec.message());
    std::vector<std::string> written;
    for (int r : store.ranks()) {
        const RankTrace& rt = *store.rank(r);
        const std::string path =
            (std::filesystem::path(dir) / fmt::format("rank-{}.pt.trace.json{}", r, gz ? ".gz" : "")).string();
        OutputFile file(path);  // written beside, renamed over it whole (output_file.h)
        {
            TextOutput out(file.write_to(), gz);
            // Kineto's own spacing ("rank": R): HTA finds a file's rank with the pattern "rank":\s+(\d+).
            const std::string imported_backend = imported_run_info(rt).backend;
            const std::string backend = rt.imported() ? (imported_backend.empty() ? "nccl" : imported_backend)
                                        : !rt.lanes[size_t(Lane::device_comm)].spans().empty() ? "nccl"
                                                                                               : "mpi";
            const std::string dist = fmt::format(R"({{"backend": {}, "rank": {}, "world_size": {}}})", quoted(backend),
                                                 r, store.world_size());
            std::string head = "{\"schemaVersion\": 1,\n\"distributedInfo\": " + dist + ",\n";
            if (rt.has_device_spans()) head += "\"deviceProperties\": " + device_properties(rt).dump() + ",\n";
            head += "\"displayTimeUnit\": \"ms\",\n\"traceName\": " + quoted(path) + ",\n\"traceEvents\": [\n";
            out.write(head);
            bool first = true;
            rank_events(store, rt, [&](const std::string& e) {
                if (!first) out.write(",\n");
                out.write(e);
                first = false;
            });
            out.write("\n]}\n");
            if (!out.close()) fail_user("error while writing '{}' (disk full?)", path);
        }
        file.commit();
        written.push_back(path);
    }
    return written;
}

}  // namespace us::prof
