// Helpers for profiler tests: a sink that keeps batches in memory, and builders for synthetic traces whose
// answers are known.
#pragma once

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "common/core/memory_category.h"
#include "common/settings/config.h"
#include "profiler/record/recorder.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/chunk.h"

namespace us::test {

class MemorySink final : public prof::EventSink {
public:
    struct Data {
        std::mutex mutex;
        std::vector<std::string> metadata;
        std::vector<prof::EventBatch> batches;
        bool finished = false, clean = false;
    };
    explicit MemorySink(std::shared_ptr<Data> d) : m_data(std::move(d)) {}
    void write_metadata(const std::string& json) override {
        std::lock_guard l(m_data->mutex);
        m_data->metadata.push_back(json);
    }
    void write_batch(const prof::EventBatch& b) override {
        std::lock_guard l(m_data->mutex);
        m_data->batches.push_back(b);
    }
    void finish(bool clean, uint64_t, const std::string& = {}) override {
        std::lock_guard l(m_data->mutex);
        m_data->finished = true;
        m_data->clean = clean;
    }

private:
    std::shared_ptr<Data> m_data;
};

// Builds the chunks of a synthetic rank: spans in milliseconds for readability.
class SyntheticRank {
public:
    explicit SyntheticRank(int rank, int world = 1) : m_rank(rank), m_world(world) {}
    uint32_t name(const std::string& s) {
        for (auto& d : m_batch.strings)
            if (d.text == s) return d.id;
        const uint32_t id = uint32_t(m_batch.strings.size());
        m_batch.strings.push_back({id, s});
        return id;
    }
    void span(prof::Lane lane, prof::SpanKind kind, double begin_ms, double end_ms, const std::string& n, int step = 1,
              prof::OpClass op = prof::OpClass::none, uint64_t flops = 0, int micro_batch = -1) {
        prof::EventRecord e{};
        auto& s = e.span;
        s.type = uint8_t(prof::EventType::span);
        s.lane = uint8_t(lane);
        s.kind = uint8_t(kind);
        s.op = uint8_t(op);
        s.begin_ns = std::llround(begin_ms * 1e6);
        s.end_ns = std::llround(end_ms * 1e6);
        s.name = name(n);
        s.step = step;
        s.flops = flops;
        s.micro_batch = int16_t(micro_batch);
        s.layer = -1;
        s.peer = -1;
        m_batch.events.push_back(e);
    }
    void step(double b, double e, int step) { span(prof::Lane::host, prof::SpanKind::step, b, e, "step", step); }
    void op(double b, double e, int step = 1, uint64_t flops = 0) {
        span(prof::Lane::compute, prof::SpanKind::op, b, e, "gemm", step, prof::OpClass::gemm, flops);
    }
    void comm(double b, double e, int step = 1) {
        span(prof::Lane::comm, prof::SpanKind::comm, b, e, "all_reduce", step, prof::OpClass::all_reduce);
    }
    // What the GPU ran (CUPTI): a kernel, memcpy or memset on the device lane, a NCCL kernel on device_comm.
    void kernel(double b, double e, int stream = 0, const std::string& n = "gelu_kernel", int step = 1) {
        span(prof::Lane::device, prof::SpanKind::op, b, e, n, step, prof::OpClass::activation);
        m_batch.events.back().span.thread = uint8_t(stream);
    }
    // The span added last, to set what the helpers leave at their defaults (a peer, a group).
    prof::SpanRecord& last_span() { return m_batch.events.back().span; }
    void nccl(double b, double e, prof::OpClass op = prof::OpClass::all_reduce, int stream = 1, int step = 1) {
        span(prof::Lane::device_comm, prof::SpanKind::comm, b, e, "ncclDevKernel", step, op);
        m_batch.events.back().span.thread = uint8_t(stream);
    }
    void counter(double t_ms, const std::string& n, double value, int step = 1) {
        prof::EventRecord e{};
        auto& c = e.counter;
        c.type = uint8_t(prof::EventType::counter);
        c.t_ns = std::llround(t_ms * 1e6);
        c.value = value;
        c.name = name(n);
        c.step = step;
        m_batch.events.push_back(e);
    }
    void memory(double t_ms, us::MemCategory c, int64_t category_bytes, int64_t total, prof::Phase phase,
                int step = 1) {
        prof::EventRecord e{};
        auto& m = e.memory;
        m.type = uint8_t(prof::EventType::memory);
        m.t_ns = std::llround(t_ms * 1e6);
        m.category = uint8_t(c);
        m.category_bytes = category_bytes;
        m.total_bytes = total;
        m.phase = uint8_t(phase);
        m.step = step;
        m.label = name("alloc");
        m_batch.events.push_back(e);
    }
    std::vector<prof::Chunk> chunks(const std::string& metadata_json) const {
        std::vector<prof::Chunk> out;
        prof::Chunk meta;
        meta.kind = prof::ChunkKind::metadata;
        meta.rank = uint32_t(m_rank);
        meta.text = metadata_json;
        out.push_back(meta);
        prof::Chunk ev;
        ev.kind = prof::ChunkKind::events;
        ev.rank = uint32_t(m_rank);
        ev.strings = m_batch.strings;
        ev.events = m_batch.events;
        out.push_back(ev);
        prof::Chunk end;
        end.kind = prof::ChunkKind::end;
        end.rank = uint32_t(m_rank);
        end.text = R"({"clean": true, "dropped_events": 0})";
        out.push_back(end);
        return out;
    }
    const prof::EventBatch& batch() const { return m_batch; }

private:
    int m_rank, m_world;
    prof::EventBatch m_batch;
};

// Loads a synthetic rank into the store, with its metadata.
inline void load(prof::TraceStore& store, const SyntheticRank& r, const std::string& meta) {
    for (const auto& c : r.chunks(meta)) store.add_chunk(c);
    store.finalize();
}

// A rank's metadata for a small model on a dp x pp grid (world / pp_size data-parallel replicas).
inline std::string metadata(int rank, int world, int dp, int pp, int pp_size, int grad_accum = 1,
                            double peak_gflops = 100, const std::string& pp_schedule = "1f1b") {
    TrainConfig cfg;
    cfg.model.hidden = 64, cfg.model.layers = 4, cfg.model.heads = 4, cfg.model.seq = 32;
    cfg.batch = 4;
    cfg.grad_accum = grad_accum;
    cfg.parallel.dp = world / pp_size;
    cfg.parallel.pp = pp_size;
    cfg.parallel.pp_schedule = parse_pipeline_schedule(pp_schedule);
    nlohmann::json m = {{"rank", rank},
                        {"world_size", world},
                        {"coords", {{"dp", dp}, {"pp", pp}, {"tp", 0}, {"cp", 0}, {"ep", 0}}},
                        {"grid", {{"dp", world / pp_size}, {"pp", pp_size}}},
                        {"config", cfg.to_json()},
                        {"device_peak_gflops", peak_gflops}};
    return m.dump();
}

}  // namespace us::test
