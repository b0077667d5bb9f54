// Entries resolved to calls and stacks (collective_call.h).
#include "profiler/hang/collective_call.h"

#include <fmt/format.h>

namespace us::hang {

CollectiveCall call_of(const flight::FlightDump& d, const flight::FlightEntry& e) {
    CollectiveCall c;
    c.seq_id = e.is_p2p ? e.p2p_seq_id : e.collective_seq_id;
    c.p2p = e.is_p2p;
    c.op = d.op_name(e);
    const flight::TensorShapes& s = d.shapes[e.shapes];
    c.input_sizes = s.input_sizes;
    c.output_sizes = s.output_sizes;
    for (flight::StringId id : s.input_dtypes) c.input_dtypes.push_back(d.text(id));
    for (flight::StringId id : s.output_dtypes) c.output_dtypes.push_back(d.text(id));
    c.state = entry_completed(e) ? "completed" : flight::entry_state_name(e.state);
    c.rank = d.rank;
    return c;
}

std::vector<StackFrame> stack_of(const flight::FlightDump& d, const flight::FlightEntry& e) {
    std::vector<StackFrame> frames;
    for (const flight::Frame& f : d.stacks[e.stack]) frames.push_back({d.text(f.name), d.text(f.file), f.line});
    return frames;
}

std::string call_label(const CollectiveCall& c) {
    if (c.op.empty()) return fmt::format("collective #{}", c.seq_id);
    return fmt::format("{} #{}", flight::op_short_name(c.op), c.seq_id);
}

std::string shapes_label(const CollectiveCall& c) {
    std::string s = "[";
    for (size_t i = 0; i < c.input_sizes.size(); ++i) {
        s += i ? ", [" : "[";
        for (size_t j = 0; j < c.input_sizes[i].size(); ++j) s += (j ? ", " : "") + std::to_string(c.input_sizes[i][j]);
        s += "]";
    }
    s += "]";
    for (size_t i = 0; i < c.input_dtypes.size(); ++i) s += (i ? "," : " ") + c.input_dtypes[i];
    return s;
}

}  // namespace us::hang
