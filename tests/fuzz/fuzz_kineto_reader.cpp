// libFuzzer target: arbitrary bytes as a PyTorch profiler (Kineto) trace, plain or gzip, through both walks of the
// reader (whole with simdjson, and in pieces) and the mapping into the trace store. Anything but a clean UserError
// (a crash, a hang, a sanitizer report) is a finding, and so is a trace that both walks read, differently.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_parse.h"
#include "profiler/import/kineto_reader.h"
#include "profiler/trace/trace_store.h"

namespace {

// What a walk made of the input: nothing when it was refused.
std::optional<us::prof::KinetoFile> walk(const uint8_t* data, size_t size, us::prof::KinetoWalk how) {
    us::prof::ByteSource source(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    try {
        return us::prof::parse_kineto(source, how);
    } catch (const us::UserError&) {
        return std::nullopt;
    }
}

bool same_spans(const us::prof::KinetoFile& a, const us::prof::KinetoFile& b) {
    if (a.spans.size() != b.spans.size() || a.names != b.names || a.events != b.events ||
        a.memory.size() != b.memory.size() || a.allocations.size() != b.allocations.size() ||
        a.stream_rows.size() != b.stream_rows.size() || a.threads != b.threads)
        return false;
    for (size_t i = 0; i < a.spans.size(); ++i)
        if (a.spans[i].begin != b.spans[i].begin || a.spans[i].end != b.spans[i].end ||
            a.spans[i].name != b.spans[i].name || a.spans[i].bytes != b.spans[i].bytes)
            return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // The two walks agree where both read the input; what the reader in pieces reads, the whole walk reads too (it
    // falls back to pieces). The whole walk may read input that the reader in pieces refuses: simdjson skips the
    // values it is not asked for without checking the commas and colons inside them (docs/performance.md).
    const auto whole = walk(data, size, us::prof::KinetoWalk::whole_when_it_fits);
    const auto pieces = walk(data, size, us::prof::KinetoWalk::in_pieces);
    if ((pieces && !whole) || (whole && pieces && !same_spans(*whole, *pieces))) std::abort();
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
