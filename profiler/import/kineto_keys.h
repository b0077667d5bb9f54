// The keys both walks of a Kineto trace read (kineto_parse.h), in one table so that they read the same fields: an
// event's own keys and those of its args, each matched by its length first, and where each value goes in the event.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "profiler/import/kineto_event.h"

namespace us::prof {

// The keys of an event that are read; the others ("s", "id", "bp" ...) are skipped.
enum class EventKey { other, ph, name, cat, pid, tid, ts, dur, args };

// The keys of args that are read; the others (shapes, strides, occupancy ...) are skipped.
enum class ArgKey {
    other,
    collective,
    dtype,
    pg_name,
    pg_desc,
    pg_ranks,
    name,  // strings and text
    external_id,
    correlation,
    stream,
    device,
    bytes,
    in_nelems,
    out_nelems,
    group_size,
    src_rank,
    dst_rank,
    mem_device,
    mem_device_type,  // integers
    input_dims,
    input_types,
    concrete_inputs,
    memory_bytes,
    memory_addr,  // kept as text
    total_allocated,
    total_reserved  // numbers
};

EventKey event_key(std::string_view raw_key);
ArgKey arg_key(std::string_view raw_key);
// Where an args key's value goes in the event when it is a string that is kept unescaped (nullptr otherwise).
std::string* string_arg(ArgKey key, KinetoEvent& e);
// Any other key that is read, from its value's text (valid while the event's text is): an integer
// (integer_from_text), a number (number_from_text), or the text itself kept as a view or copied (pg_ranks).
void read_arg_text(ArgKey key, std::string_view text, KinetoEvent& e);

}  // namespace us::prof
