// A dump's entry turned into what a report shows: the call (op, sizes, dtypes, state) and its stack, with the
// dump's interned ids resolved to text.
#pragma once

#include "profiler/hang/hang_analysis.h"

namespace us::hang {

// Whether the recorder saw the entry complete (NCCL's "completed", or a retired entry: gloo says no more).
inline bool entry_completed(const flight::FlightEntry& e) {
    return e.state == flight::EntryState::completed || e.retired;
}

CollectiveCall call_of(const flight::FlightDump& d, const flight::FlightEntry& e);
std::vector<StackFrame> stack_of(const flight::FlightDump& d, const flight::FlightEntry& e);

// "all_reduce #5" (the short op name and the sequence number), or "send #3 to 1" for p2p.
std::string call_label(const CollectiveCall& c);
// "[[1024], [8]] Float" — the input sizes and dtypes, for sentences.
std::string shapes_label(const CollectiveCall& c);

}  // namespace us::hang
