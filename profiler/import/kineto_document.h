// Pass one of the Kineto reader over a trace held whole in memory, walked with simdjson's On-Demand API: its SIMD
// structural index finds where each event begins and ends several times faster than the byte-by-byte reader in
// pieces (json_stream.h), which stays for traces too large to hold and for every message about damaged input.
#pragma once

#include <cstddef>
#include <string_view>

#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_parse.h"

namespace us::prof {

// The zero bytes simdjson reads past the end of a document.
size_t kineto_document_padding();

// Fills `f` from the trace `json`, whose buffer holds at least kineto_document_padding() zero bytes after it
// (`padded_size` in all); `source` hears at intervals how far the walk has come (its progress line, a cancel). False
// when simdjson cannot walk it (not valid JSON or UTF-8, an event the event parser refuses, no traceEvents): `f` is
// then to be thrown away and the trace read in pieces, which says what is wrong.
bool parse_kineto_document(std::string_view json, size_t padded_size, ByteSource& source, KinetoFile& f);

}  // namespace us::prof
