// What pass two of the Kineto reader (kineto_reader.h) learns from a rank's spans before it writes any: the steps'
// windows, what each name says, and the host stack walk that gives each host span its enclosing CPU op, phase and
// collective, with the collective nests' facts, the kernels' launches and the groups that carry sends and receives.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/import/kineto_parse.h"

namespace us::prof {

// The rank's ProfilerSteps in time order; none: one step over the whole window.
struct KinetoSteps {
    std::vector<KinetoSpan> steps;
    bool window = false;          // the file has no ProfilerStep and no optimizer step: one step, the window
    bool from_optimizer = false;  // no ProfilerStep: derived from the Optimizer.step annotations
    // The step whose window holds t (ours, 1-based), 0 for none.
    int32_t step_of(int64_t t) const;
};
// Adds the warning that the whole window is one step when the file has spans but no ProfilerStep.
KinetoSteps kineto_steps(const KinetoFile& file, std::vector<std::string>& warnings);

// What a span's name says, worked out once a name rather than once a span (a rank repeats a few hundred names).
struct NameFacts {
    bool collective_op = false, collective_wait = false, gloo = false, nccl_kernel = false;
    Phase phase = Phase::none;
    OpClass op = OpClass::none;
};
std::vector<NameFacts> kineto_name_facts(const KinetoFile& file);

// What the stack walk tells about a host span.
struct HostContext {
    int32_t parent_op = -1;   // innermost enclosing cpu_op (or user annotation), itself for a cpu_op
    int32_t collective = -1;  // the outermost collective op whose nest holds it
    Phase phase = Phase::none;
    bool envelope = false;  // encloses a collective (or a wait for one): not compute on a CPU-only rank
};

struct HostWalk {
    std::vector<uint32_t> host;    // the host spans (not device, not step), per thread in (begin, longest first)
    std::vector<HostContext> ctx;  // per span (host spans only filled)
    std::vector<KinetoSpan> nest;  // per outermost collective op: its nest's collective, bytes, group and peers
    std::unordered_map<int64_t, uint32_t> launch_of;  // correlation -> the runtime call
};
HostWalk walk_host_spans(const KinetoFile& file, const std::vector<NameFacts>& facts);

// Per KinetoFile::groups index, whether sends or receives ran on it (a pipeline's group, when nothing else tells).
std::vector<bool> kineto_p2p_groups(const KinetoFile& file, const HostWalk& walk, const std::vector<NameFacts>& facts);

}  // namespace us::prof
