// Instrumentation for the engine. With ULTRASCOPE_PROFILE off every macro compiles to nothing; with it on and the
// recorder stopped, each costs one relaxed load of a global flag.
//
//   US_PROF_ZONE(lane, kind, op, US_PROF_NAME("gemm"), flops, bytes);  // a span for the enclosing scope
//   US_PROF_STEP(step);                    // the thread's step for every record made in this scope
//   US_PROF_PHASE(phase, micro_batch);     // forward / backward / optimizer of one micro-batch
//   US_PROF_LAYER(layer);
//   US_PROF_OP_NAME(US_PROF_NAME("c_attn dW"));  // names the ops run in this scope
//   US_PROF_DEVICE_OP(OpClass::all_reduce, US_PROF_NAME("grad bucket"));  // GPU work here belongs to this op
#pragma once

#include "profiler/record/recorder.h"

#ifndef ULTRASCOPE_PROFILE
#define ULTRASCOPE_PROFILE 1
#endif

namespace us::prof {

// A span for the enclosing scope. An op zone also brackets the op for an attached device collector (OpHooks),
// keeping the hooks it entered with so that enter and exit always pair up.
class Zone {
public:
    Zone(Lane lane, SpanKind kind, OpClass op, uint32_t name, uint64_t flops = 0, uint64_t bytes = 0)
        : m_active(enabled()), m_lane(lane), m_kind(kind), m_op(op), m_name(name), m_flops(flops), m_bytes(bytes) {
        if (!m_active) return;
        if (kind == SpanKind::op && (m_hooks = op_hooks())) m_hooks->enter(current_op_tag(op, name));
        m_begin = read_ticks();
    }
    ~Zone() {
        if (!m_active) return;
        record_span(m_lane, m_kind, m_op, m_name, m_begin, read_ticks(), m_flops, m_bytes);
        if (m_hooks) m_hooks->exit();
    }
    Zone(const Zone&) = delete;
    Zone& operator=(const Zone&) = delete;

private:
    bool m_active;
    Lane m_lane;
    SpanKind m_kind;
    OpClass m_op;
    uint32_t m_name;
    uint64_t m_flops, m_bytes;
    int64_t m_begin = 0;
    const OpHooks* m_hooks = nullptr;
};

// Attributes the GPU work launched in its scope to an op without recording a span: for device work started
// outside an op zone, e.g. a NCCL collective (op = its collective, name = what it moves).
class DeviceOpScope {
public:
    DeviceOpScope(OpClass op, uint32_t name) : m_hooks(enabled() ? op_hooks() : nullptr) {
        if (m_hooks) m_hooks->enter(current_op_tag(op, name));
    }
    ~DeviceOpScope() {
        if (m_hooks) m_hooks->exit();
    }
    DeviceOpScope(const DeviceOpScope&) = delete;
    DeviceOpScope& operator=(const DeviceOpScope&) = delete;

private:
    const OpHooks* m_hooks;
};

// Sets fields of the thread's RecordContext for a scope and restores them after.
class ContextScope {
public:
    ContextScope() : m_saved(context()) {}
    ~ContextScope() { context() = m_saved; }
    ContextScope(const ContextScope&) = delete;
    ContextScope& operator=(const ContextScope&) = delete;

private:
    RecordContext m_saved;
};

class StepScope : ContextScope {
public:
    explicit StepScope(int step) { context().step = step; }
};
class PhaseScope : ContextScope {
public:
    PhaseScope(Phase phase, int micro_batch, int chunk = 0) {
        context().phase = phase;
        context().micro_batch = int16_t(micro_batch);
        context().chunk = uint8_t(chunk);
    }
};
class LayerScope : ContextScope {
public:
    explicit LayerScope(int layer) { context().layer = int16_t(layer); }
};
class OpNameScope : ContextScope {
public:
    explicit OpNameScope(uint32_t name) { context().op_name = name; }
};

}  // namespace us::prof

#define US_PROF_CONCAT_(a, b) a##b
#define US_PROF_CONCAT(a, b) US_PROF_CONCAT_(a, b)

#if ULTRASCOPE_PROFILE
// A string id computed once per call site.
#define US_PROF_NAME(literal)                                              \
    ([]() -> uint32_t {                                                    \
        static const uint32_t us_prof_id = ::us::prof::string_id(literal); \
        return us_prof_id;                                                 \
    }())
#define US_PROF_ZONE(...) ::us::prof::Zone US_PROF_CONCAT(us_prof_zone_, __LINE__)(__VA_ARGS__)
#define US_PROF_STEP(step) ::us::prof::StepScope US_PROF_CONCAT(us_prof_step_, __LINE__)(step)
#define US_PROF_PHASE(...) ::us::prof::PhaseScope US_PROF_CONCAT(us_prof_phase_, __LINE__)(__VA_ARGS__)
#define US_PROF_LAYER(layer) ::us::prof::LayerScope US_PROF_CONCAT(us_prof_layer_, __LINE__)(layer)
#define US_PROF_OP_NAME(id) ::us::prof::OpNameScope US_PROF_CONCAT(us_prof_opname_, __LINE__)(id)
#define US_PROF_DEVICE_OP(op, id) ::us::prof::DeviceOpScope US_PROF_CONCAT(us_prof_devop_, __LINE__)(op, id)
#else
#define US_PROF_NAME(literal) 0u
#define US_PROF_ZONE(...) (void)0
#define US_PROF_STEP(step) (void)0
#define US_PROF_PHASE(...) (void)0
#define US_PROF_LAYER(layer) (void)0
#define US_PROF_OP_NAME(id) (void)0
#define US_PROF_DEVICE_OP(op, id) (void)0
#endif
