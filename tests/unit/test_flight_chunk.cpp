// A rank's Flight Recorder dump travels as a chunk of its own (ChunkKind::flight_dump, the pickle bytes as they are):
// through a trace file and through the live stream into the store, whose RankTrace keeps the rank's latest dump; a
// trace without one keeps none.
#include <chrono>
#include <cstring>
#include <thread>

#include "profiler/trace/trace_store.h"
#include "profiler/transport/chunk.h"
#include "profiler/transport/listener.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/tcp_sink.h"
#include "profiler/transport/trace_file.h"
#include "test_util.h"

using namespace us;
using namespace us::prof;
using namespace us::test;

namespace {

// Bytes like a pickle's: any value, zeros included.
std::string dump_bytes(char tag) {
    std::string s = "\x80\x02}q\x00";
    s += std::string(3000, tag);
    s[2000] = '\0';
    return s;
}

}  // namespace

TEST_CASE("flight dump chunks: encoded, decoded and kept by the store as the rank's latest",
          "[cpu][flight][transport]") {
    const std::string bytes = dump_bytes('a');
    const std::string encoded = encode_chunk(ChunkKind::flight_dump, 2, 5, nullptr, bytes);
    ChunkHeader h;
    std::memcpy(&h, encoded.data(), sizeof h);
    CHECK(validate_header(h).empty());
    const Chunk c = decode_chunk(h, encoded.data() + sizeof h, "test");
    CHECK(c.kind == ChunkKind::flight_dump);
    CHECK(c.text == bytes);
    TraceStore store;
    store.add_chunk(c);
    REQUIRE(store.rank(2));
    CHECK(store.rank(2)->flight_dump == bytes);
}

TEST_CASE("flight dumps round-trip through a trace file, a trace without one has none", "[cpu][flight][transport]") {
    const std::string path = temp_path("flight.ustrace");
    const std::string first = dump_bytes('a'), latest = dump_bytes('b');
    {
        auto w = std::make_shared<TraceFileWriter>(path);
        FileSink rank0(w, 0), rank1(w, 1);
        rank0.write_metadata(R"({"rank": 0, "world_size": 2})");
        rank1.write_metadata(R"({"rank": 1, "world_size": 2})");
        rank0.write_flight_dump(first);
        rank0.write_flight_dump(latest);  // a later dump replaces the first
        rank0.finish(false, 0, "stopped");
        rank1.finish(false, 0, "stopped");
    }
    TraceStore store;
    CHECK(load_trace(path, store).empty());
    REQUIRE(store.rank(0));
    REQUIRE(store.rank(1));
    CHECK(store.rank(0)->flight_dump == latest);
    CHECK(store.rank(1)->flight_dump.empty());
}

TEST_CASE("flight dumps travel over the live stream", "[cpu][flight][transport]") {
    TraceListener listener("127.0.0.1", 0, random_token());
    const std::string bytes = dump_bytes('c');
    {
        TcpSink sink({"127.0.0.1", listener.port()}, 1, 2, listener.token());
        REQUIRE(sink.connected());
        sink.write_metadata(R"({"rank": 1})");
        sink.write_flight_dump(bytes);
        sink.finish(false, 0, "hung");
    }
    std::vector<ListenerMessage> got;
    bool ended = false;
    for (int waited = 0; !ended && waited < 5000; waited += 10) {
        listener.poll(got);
        for (const auto& m : got) ended |= m.kind == ListenerMessage::Kind::ended;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    TraceStore store;
    for (const auto& m : got)
        if (m.kind == ListenerMessage::Kind::chunk) store.add_chunk(m.chunk);
    REQUIRE(store.rank(1));
    CHECK(store.rank(1)->flight_dump == bytes);
}
