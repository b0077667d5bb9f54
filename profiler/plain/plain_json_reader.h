// JSON read into the same flat plain data as a pickle (plain_data.h), for the JSON form of a memory snapshot:
// objects become dicts with string keys, arrays lists, whole numbers that fit in int64 integers, others floats.
#pragma once

#include <string>
#include <string_view>

#include "profiler/plain/plain_data.h"

namespace us::plain {

// Throws UserError naming `source` on malformed JSON or nesting deeper than `max_depth`.
PlainData read_plain_json(std::string_view bytes, const std::string& source, size_t max_depth = 10000);

}  // namespace us::plain
