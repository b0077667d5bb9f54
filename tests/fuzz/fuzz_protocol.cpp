// libFuzzer target: arbitrary bytes as a live stream. The first 64 bytes are checked as a hello, the rest is fed
// to the chunk decoder in pieces whose sizes come from the input itself.
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/core/check.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size >= sizeof(us::prof::Hello)) {
        us::prof::Hello h;
        std::memcpy(&h, data, sizeof h);
        (void)us::prof::validate_hello(h);
        (void)us::prof::tokens_equal(h.token, std::string(us::prof::kTokenBytes, 'a'));
        data += sizeof h;
        size -= sizeof h;
    }
    us::prof::StreamDecoder decoder("fuzz stream");
    us::prof::TraceStore store;
    size_t pos = 0;
    try {
        while (pos < size) {
            const size_t piece = 1 + (data[pos] % 97);
            const size_t n = std::min(piece, size - pos);
            decoder.feed(reinterpret_cast<const char*>(data + pos), n);
            pos += n;
            while (auto chunk = decoder.next()) store.add_chunk(*chunk);
        }
        store.finalize();
    } catch (const us::UserError&) {
    }
    return 0;
}
