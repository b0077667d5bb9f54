// A Flight Recorder dump written as PyTorch writes one: a pickle of plain dicts and lists, format version "2.10"
// (docs/hangs.md lists the keys), so that PyTorch's own analyzer and Ultrascope's read the engine's dumps alike.
// The engine's extras ride in keys PyTorch ignores: "rank", "host" and "ultrascope" (the injected fault).
#pragma once

#include <string>

#include "profiler/flight/flight_dump.h"

namespace us::flight {

inline constexpr const char* kWrittenVersion = "2.10";

// The dump's bytes (a protocol-4 pickle).
std::string write_flight_dump(const FlightDump& dump);

// Writes the dump to `path` through a temporary file renamed into place, so a reader never sees half a dump.
// Returns false (errno set) when the file cannot be written. Safe to call from a watchdog thread; not from a
// signal handler.
bool save_flight_dump(const FlightDump& dump, const std::string& path);

}  // namespace us::flight
