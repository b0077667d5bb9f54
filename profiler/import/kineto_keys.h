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
    concrete_inputs,  // kept as text
    total_allocated,
    total_reserved  // numbers
};

EventKey event_key(std::string_view raw_key);
ArgKey arg_key(std::string_view raw_key);
// Where an args key's value goes in the event, by the way it is read (nullptr when it is not read that way):
// integer_from_text, unescaped string, the value's text kept as a view, number_from_text.
int64_t* integer_arg(ArgKey key, KinetoEvent& e);
std::string* string_arg(ArgKey key, KinetoEvent& e);
std::string_view* text_arg(ArgKey key, KinetoEvent& e);
double* number_arg(ArgKey key, KinetoEvent& e);

}  // namespace us::prof
