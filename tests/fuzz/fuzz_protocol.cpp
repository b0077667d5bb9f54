// libFuzzer target: arbitrary bytes as a live stream, read as the listener reads it: the handshake reader takes the
// hello in pieces whose sizes come from the input itself, and the rest (after an accepted hello, or in any case, to
// reach the decoder) goes to the chunk decoder in pieces too.
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>

#include "common/core/check.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // The token the fuzzer's seeds carry (fuzz_seed.cpp): accepted hellos are reachable.
    us::prof::HandshakeReader handshake(std::string(us::prof::kTokenBytes, 'a'));
    size_t pos = 0;
    while (pos < size && !handshake.complete()) {
        const size_t piece = 1 + (data[pos] % 13);
        pos += handshake.feed(reinterpret_cast<const char*>(data + pos), std::min(piece, size - pos));
    }
    if (handshake.complete()) {
        (void)us::prof::welcome_status_text(uint16_t(handshake.status()));
        (void)handshake.problem().size();
    }
    us::prof::StreamDecoder decoder("fuzz stream");
    us::prof::TraceStore store;
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
