// Where a rank's compute goes, op by op: the op spans of its steady steps grouped by name ("mlp.c_fc dW",
// "attention backward", a GPU kernel's name ...), with their calls, time and FLOP rate per step. It is the first
// table to read when a step is slower than it should be, and the one that says whether a kernel or the BLAS is
// the bottleneck. Time is self time: an op span nested in another (on the same recording thread or stream) is
// taken out of its parent, so the rows add up to the compute time without counting anything twice. On a GPU
// traced by CUPTI the rows are the kernels the device executed (they carry no FLOPs); elsewhere the engine's op
// spans, which carry the FLOPs of their work (docs/formulas.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/step_breakdown.h"
#include "profiler/event.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

struct OpRow {
    std::string name;        // whole: a kernel's full signature
    std::string short_name;  // what a table shows: short_op_name() of the name, uncut
    OpClass op = OpClass::none;
    // The class a table shows: on a GPU's rows the kernel's fine class (gemm, conv, elementwise, memory ...;
    // common/core/kernel_names.h), from its name, else from the launching op's class; elsewhere the op's class.
    std::string_view kind = kOpClassNames[0];
    int64_t calls = 0;     // over the steps
    double self_s = 0;     // summed over the steps, nested op spans taken out
    double total_s = 0;    // summed over the steps, the spans whole
    double longest_s = 0;  // one call's
    uint64_t flops = 0;    // summed over the steps (0: the spans carry none)
    double per_call_s() const { return calls > 0 ? self_s / double(calls) : 0; }
    // Attention spans carry the formula's FLOPs, the whole s x s square (6N + 12Lhs); a causal kernel computes
    // about half, so their rate is marked wherever it is shown.
    bool flops_count_whole_square() const { return op == OpClass::attention && flops > 0; }
};

struct OpTable {
    int rank = 0;
    int steps = 0;                // the steady steps the rows sum over
    double wall_s = 0;            // those steps' wall time
    bool device_kernels = false;  // the rows are a GPU's kernels (CUPTI)
    std::vector<OpRow> rows;      // most self time first
    double self_s() const;        // all rows
    // Per step (0 without steps).
    double per_step(double seconds) const { return steps > 0 ? seconds / steps : 0; }
    // Seconds summed over the steps (a row's self time, several rows') over their wall time (0 without it).
    double share_of_wall(double seconds) const { return wall_s > 0 ? seconds / wall_s : 0; }
    // FLOPs per second of a row over its spans' whole time (0 without FLOPs).
    static double flop_rate(const OpRow& row) { return row.total_s > 0 ? double(row.flops) / row.total_s : 0; }
};

// The name to show in `width` characters (fit_op_name). A kernel's (a device row's, or any name with a template
// or a parameter list, or mangled) is short_kernel_name()'s: without its namespaces, return type and parameters, its
// template arguments summarised ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<...
// MulFunctor<float> >, ...>(int, ...)" -> "vectorized_elementwise_kernel<MulFunctor>"); an op's without its
// namespaces ("aten::mm" -> "mm"), engine op names ("mlp.c_fc dW") as they are.
std::string short_op_name(std::string_view name, size_t width, bool device_kernel = false);
// A shown name cut to `width` characters, at its end ("vectorized_elementwise_kernel<CUDAFunct...").
std::string fit_op_name(std::string_view shown, size_t width);

// The op spans of rank `rank` that begin inside the windows of `steps` (the steady ones, step_breakdown.h).
OpTable op_table(const TraceStore& store, int rank, const std::vector<StepBreakdown>& steps);

}  // namespace us::prof
