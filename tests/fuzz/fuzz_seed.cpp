// Writes seed inputs for the fuzzers: a small valid trace file (with spans on every kind of lane), and a hello
// followed by a valid chunk stream.
#include <cstring>
#include <fstream>
#include <string>

#include "profiler/transport/chunk.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/trace_file.h"

int main(int argc, char** argv) {
    if (argc < 3) return 2;
    const std::string dir = argv[1], target = argv[2];
    using namespace us::prof;
    EventBatch b;
    b.strings.push_back({0, "gemm"});
    b.strings.push_back({1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"});
    for (int i = 0; i < 4; ++i) {
        EventRecord e{};
        e.span.type = uint8_t(EventType::span);
        e.span.lane = 1;
        e.span.kind = uint8_t(SpanKind::op);
        e.span.begin_ns = i * 10;
        e.span.end_ns = i * 10 + 5;
        b.events.push_back(e);
        // the same work as the GPU ran it, on two streams, and a NCCL kernel (the device lanes)
        e.span.lane = uint8_t(Lane::device);
        e.span.thread = uint8_t(i % 2);
        b.events.push_back(e);
        e.span.lane = uint8_t(Lane::device_comm);
        e.span.kind = uint8_t(SpanKind::comm);
        e.span.op = uint8_t(OpClass::all_reduce);
        e.span.name = 1;
        b.events.push_back(e);
    }
    const std::string chunks =
        encode_chunk(ChunkKind::metadata, 0, 0, nullptr, R"({"rank":0,"clock":{"offset_ns":3}})") +
        encode_chunk(ChunkKind::events, 0, 1, &b, {}) +
        encode_chunk(ChunkKind::end, 0, 2, nullptr, R"({"clean":true})");
    std::ofstream out(dir + "/seed-" + target, std::ios::binary);
    if (target == "fuzz_protocol") {
        const Hello h = make_hello(0, 1, std::string(kTokenBytes, 'a'));
        out.write(reinterpret_cast<const char*>(&h), sizeof h);
    } else {
        FileHeader fh{};
        std::memcpy(fh.magic, "USTRACE", 8);
        fh.version = kTraceFormatVersion;
        out.write(reinterpret_cast<const char*>(&fh), sizeof fh);
    }
    out << chunks;
    return 0;
}
