// A pickle reader for untrusted files: protocols 2 to 5, plain data only. Classes, calls and persistent ids (GLOBAL,
// STACK_GLOBAL, REDUCE, BUILD, NEWOBJ, INST, OBJ, PERSID, EXT ...) are refused with a message naming the opcode and
// its offset, never executed. Every length is checked against the bytes left; no recursion a file can drive.
#pragma once

#include <string>
#include <string_view>

#include "profiler/plain/plain_data.h"

namespace us::plain {

struct PickleLimits {
    size_t max_mark_depth = 10000;  // nested MARKs (lists/dicts/tuples being built at once)
};

// Reads one pickle from `bytes` (`source` names it in messages: a file name). Throws UserError on anything else
// than plain data or on a malformed pickle.
PlainData read_pickle(std::string_view bytes, const std::string& source, const PickleLimits& limits = {});

// The same into `reuse`'s room (emptied first): many files read one after another on a thread allocate once.
PlainData read_pickle(std::string_view bytes, const std::string& source, PlainData&& reuse,
                      const PickleLimits& limits = {});

// Whether bytes look like a pickle of protocol 2 or later (PROTO opcode first).
bool looks_like_pickle(std::string_view bytes);

}  // namespace us::plain
