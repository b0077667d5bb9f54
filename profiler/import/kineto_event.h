// One Kineto trace event as the reader needs it: the fields of `traceEvents[i]` it maps (kineto_reader.h), parsed
// from the event's JSON text in one pass into a reused flat struct (no allocation once its strings have grown).
// Times are converted exactly from decimal microseconds to integer nanoseconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace us::prof {

struct KinetoEvent {
    char ph = 0;  // 'X' complete, 'i'/'I' instant, 'M' metadata, 's'/'f' flow, ...
    std::string name, cat;
    int64_t pid = 0, tid = 0;  // numeric ids; a string id is hashed and flagged
    bool pid_text = false, tid_text = false;
    bool has_ts = false, has_dur = false;
    int64_t ts_ns = 0, dur_ns = 0;
    // args (absent: -1 / empty / NaN)
    int64_t external_id = -1, correlation = -1, stream = -1, device = -1, bytes = -1;
    int64_t in_nelems = -1, out_nelems = -1, group_size = -1, src_rank = -1, dst_rank = -1;
    std::string collective, dtype, pg_name, pg_desc, pg_ranks, args_name;  // pg_ranks: the JSON text of the list
    double total_allocated = -1, total_reserved = -1;
    int64_t mem_device = INT64_MIN;  // [memory] "Device Id"; with "Device Type"
    int64_t mem_device_type = -1;
    // Views into the event's text (valid while it is): args' "Input Dims", "Input type", "Concrete Inputs", a
    // [memory] event's "Bytes" and "Addr", and "stream" as written.
    std::string_view input_dims, input_types, concrete_inputs, memory_bytes, memory_addr, stream_text;

    void clear();
};

// Parses one event object's text; on failure returns false and says why in `error`.
bool parse_kineto_event(std::string_view text, KinetoEvent& e, std::string& error);

// What both walks of a trace (kineto_parse.h) make of a value's text, so that they read every event alike:
// an integer field ('12', '"stream 7"', '3.0'; anything else leaves `out` as it was), a number field (-1 when not a
// number), and a pid or tid given as a string (its raw text hashed, flagged by bit 62).
void integer_from_text(std::string_view text, int64_t& out);
double number_from_text(std::string_view text);
int64_t text_id(std::string_view raw);

// Decimal microseconds ("12.345", "1682725898236567", "1e3") to nanoseconds, rounded; false when not a number or
// out of range.
bool parse_us_as_ns(std::string_view text, int64_t& ns);

}  // namespace us::prof
