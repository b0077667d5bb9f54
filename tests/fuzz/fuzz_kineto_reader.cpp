// libFuzzer target: arbitrary bytes as a PyTorch profiler (Kineto) trace, plain or gzip, through the streaming
// reader and the mapping into the trace store. Anything but a clean UserError (a crash, a hang, a sanitizer report)
// is a finding.
#include <cstdint>
#include <string>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_parse.h"
#include "profiler/import/kineto_reader.h"
#include "profiler/trace/trace_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    us::prof::ByteSource source(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    us::prof::TraceStore store(us::prof::TraceStoreOptions{size_t(64) << 20});
    try {
        const us::prof::KinetoFile file = us::prof::parse_kineto(source);
        const int rank = us::prof::rank_in_file(file);
        us::prof::ingest_kineto(file, rank >= 0 && rank < 1000 ? rank : 0, "fuzz", store);
        store.finalize();
    } catch (const us::UserError&) {
    }
    return 0;
}
