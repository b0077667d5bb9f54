// libFuzzer target: arbitrary bytes as a trace file, through the reader and into the trace store. Anything but a
// clean UserError (a crash, a hang, a sanitizer report) is a finding.
#include <cstdint>
#include <string>

#include "common/core/check.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/trace_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    us::prof::TraceStore store;
    us::prof::TraceReadReport report;
    try {
        us::prof::read_trace_bytes(
            bytes, "fuzz input", [&](us::prof::Chunk&& c) { store.add_chunk(c); }, report);
        store.finalize();
    } catch (const us::UserError&) {
    }
    return 0;
}
