// Reads one Flight Recorder dump, as PyTorch writes it (a pickle of plain dicts and lists: torch's
// _dump_fr_trace / _dump_nccl_trace and the dump on a watchdog timeout) or as its JSON form (_dump_fr_trace_json),
// plain or gzip-compressed, and as the engine writes its own (flight_writer.h). The pickle goes through the plain
// reader (profiler/plain/pickle_reader.h): nothing in a file is ever executed, and a pickle that builds objects is
// refused. Every format version PyTorch 2.4 to 2.15 writes is read; an unknown one is refused by name.
#pragma once

#include <string>
#include <string_view>

#include "profiler/flight/flight_dump.h"

namespace us::hang {

using flight::FlightDump;

// The dump format versions this reader knows ("2.0" ... "2.10"), and whether `version` is one of them.
bool known_dump_version(std::string_view version);
const char* known_dump_versions_text();

// The dump in `bytes` (pickle or JSON; already uncompressed); `source` names it in messages and becomes
// FlightDump::source. The rank and host are the dump's own where it carries them, else -1 and "" (the caller names
// them from the file name: dump_files.h). Throws UserError on anything that is not a dump, naming what is wrong.
FlightDump read_flight_dump(std::string_view bytes, const std::string& source);

// The file at `path`, gzip or not. Throws UserError naming the file.
FlightDump load_flight_dump(const std::string& path);

// Whether the file looks like a Flight Recorder dump (a pickle or JSON whose first bytes name a dump's keys), gzip
// or not; reads at most a few KiB. A memory snapshot, a Kineto trace or an Ultrascope trace is not.
bool looks_like_flight_dump(const std::string& path);

}  // namespace us::hang
