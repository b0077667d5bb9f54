// Interned strings: stable `const char*` for labels that events and allocations carry by pointer, so that the
// hot paths never copy or own strings.
#pragma once

#include <string_view>

namespace us {

// Returns a pointer that stays valid for the life of the process; equal strings give equal pointers.
const char* intern(std::string_view text);

}  // namespace us
