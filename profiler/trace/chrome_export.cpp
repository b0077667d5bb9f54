#include "profiler/trace/chrome_export.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>

#include "common/core/check.h"
#include "common/core/memory_category.h"
#include "common/core/output_file.h"
#include "profiler/trace/text_output.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

namespace {

std::string escape(const std::string& s) { return nlohmann::json(s).dump(); }

// A thread per lane; the device lanes get one per stream (the span's thread field), numbered lane * 100 + slot.
int thread_of(int lane, const Span& s) { return lane < int(Lane::device) ? lane : lane * 100 + s.thread; }

// "device (stream 7)": the CUPTI stream id when the rank's metadata lists its streams, else the slot.
std::string device_thread_name(const RankTrace& r, int lane, uint8_t slot) {
    const std::optional<nlohmann::json>& cupti = r.info.cupti;
    const nlohmann::json streams = cupti ? cupti->value("streams", nlohmann::json::array()) : nlohmann::json::array();
    std::string stream = fmt::format("#{}", slot);
    if (streams.is_array() && slot < streams.size() && streams[slot].is_array() && streams[slot].size() == 2 &&
        streams[slot][1].is_number_unsigned())
        stream = std::to_string(streams[slot][1].get<uint64_t>());
    return fmt::format("{} (stream {})", kLaneNames[lane], stream);
}

}  // namespace

std::string rank_label(const RankTrace& r) {
    std::string label = fmt::format("rank {}", r.rank);
    if (!r.info.coords.empty()) {
        std::string parts;
        for (GridDim dim : kGridDims) {
            const std::optional<int>& c = r.info.coords[dim];
            const int size = r.info.grid[dim].value_or(1);
            if (c && (size > 1 || dim == GridDim::dp || dim == GridDim::pp))
                parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", grid_dim_name(dim), *c);
        }
        if (!parts.empty()) label += " (" + parts + ")";
    }
    if (r.info.injected_slow_factor)
        label += fmt::format(" [injected: {:g}x slower{}]", *r.info.injected_slow_factor,
                             r.info.injected_slow_kind == "load" ? ", busy threads on its CPU" : "");
    return label;
}

void export_chrome_trace(const TraceStore& store, const std::string& out_path) {
    const bool gz = out_path.size() > 3 && out_path.substr(out_path.size() - 3) == ".gz";
    OutputFile file(out_path);  // written beside, renamed over it whole (output_file.h)
    {
        TextOutput out(file.write_to(), gz);
        const int64_t origin = store.origin();
        auto us_of = [&](int64_t ns) { return fmt::format("{:.3f}", double(ns - origin) / 1e3); };
        nlohmann::json dist = {{"backend", store.run_rank_metadata().comm_backend.value_or("mpi")},
                               {"rank", 0},
                               {"world_size", store.world_size()}};
        nlohmann::json ranks = nlohmann::json::array();
        for (int r : store.ranks()) ranks.push_back({{"rank", r}, {"label", rank_label(*store.rank(r))}});
        dist["ranks"] = ranks;
        out.write("{\"displayTimeUnit\": \"ms\",\n\"distributedInfo\": " + dist.dump() + ",\n\"traceEvents\": [\n");
        bool first = true;
        auto emit = [&](const std::string& e) {
            out.write(first ? e : ",\n" + e);
            first = false;
        };
        for (int r : store.ranks()) {
            const RankTrace& rt = *store.rank(r);
            emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", r,
                             escape(rank_label(rt))));
            emit(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
                             r, r));
            for (int lane = 0; lane < int(Lane::count); ++lane) {
                if (lane < int(Lane::device))
                    emit(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})", r,
                                     lane, kLaneNames[lane]));
                bool named[256] = {};  // device lanes: streams named so far
                for (const Span& s : rt.lanes[lane].spans()) {
                    const int tid = thread_of(lane, s);
                    if (lane >= int(Lane::device) && !named[s.thread]) {
                        named[s.thread] = true;
                        emit(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                                         r, tid, escape(device_thread_name(rt, lane, s.thread))));
                        emit(fmt::format(
                            R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
                            r, tid, tid));
                    }
                    std::string label = store.name(s.name);
                    if (s.kind == SpanKind::phase && s.micro_batch >= 0 && s.phase != Phase::optimizer)
                        label = fmt::format("{}{}{}", label, s.micro_batch,
                                            s.chunk > 0 ? fmt::format(".c{}", s.chunk) : "");
                    emit(fmt::format(
                        R"({{"ph":"X","pid":{},"tid":{},"name":{},"cat":"{}","ts":{},"dur":{:.3f},"args":{{"step":{},"micro_batch":{},"layer":{},"phase":"{}","op":"{}","bytes":{},"flops":{},"chunk":{}{}}}}})",
                        r, tid, escape(label), kSpanKindNames[size_t(s.kind)], us_of(s.begin),
                        double(s.end - s.begin) / 1e3, s.step, s.micro_batch, s.layer, kPhaseNames[size_t(s.phase)],
                        kOpClassNames[size_t(s.op)], s.bytes, s.flops, s.chunk,
                        s.peer >= 0 ? fmt::format(",\"peer\":{}", s.peer) : std::string()));
                }
            }
            // Memory per category as one counter track with a series per category.
            int64_t current[kMemCategoryCount] = {};
            for (const MemoryPoint& m : rt.memory) {
                current[m.category] = m.category_bytes;
                std::string args;
                for (int c = 0; c < kMemCategoryCount; ++c)
                    args += fmt::format("{}\"{}\":{}", c ? "," : "", kMemCategoryNames[c], current[c]);
                emit(fmt::format(R"x({{"ph":"C","pid":{},"tid":0,"name":"memory (bytes)","ts":{},"args":{{{}}}}})x", r,
                                 us_of(m.t), args));
            }
            for (const auto& [name, points] : rt.counters)
                for (const CounterPoint& p : points)
                    emit(fmt::format(R"({{"ph":"C","pid":{},"tid":0,"name":{},"ts":{},"args":{{"value":{}}}}})", r,
                                     escape(store.name(name)), us_of(p.t), p.value));
        }
        out.write("\n]}\n");
        US_CHECK_INPUT(out.close(), "error while writing '{}' (disk full?)", out_path);
    }
    file.commit();
}

}  // namespace us::prof
