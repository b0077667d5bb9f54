// Recording and transport: the ring never blocks and counts drops, chunks and trace files round-trip, bad bytes
// (truncated, corrupted, wrong version, garbage on the socket) give clear errors, the listener refuses peers
// without the run's token, and a sender whose listener is gone never stalls.
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "common/core/check.h"
#include "prof_test_util.h"
#include "profiler/record/zones.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/listener.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/tcp_sink.h"
#include "profiler/transport/trace_file.h"
#include "test_util.h"

using namespace us;
using namespace us::prof;
using namespace us::test;

namespace {

EventBatch sample_batch(int events) {
    SyntheticRank r(0);
    for (int i = 0; i < events; ++i) r.op(i, i + 0.5);
    return r.batch();
}

template <typename Fn>
std::string error_of(Fn&& fn) {
    try {
        fn();
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

std::vector<ListenerMessage> wait_for(TraceListener& l, size_t count, int timeout_ms = 5000) {
    std::vector<ListenerMessage> out;
    for (int waited = 0; out.size() < count && waited < timeout_ms; waited += 10) {
        l.poll(out);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return out;
}

}  // namespace

TEST_CASE("the ring drops and counts events when the collector falls behind", "[cpu][profiler]") {
    EventRing ring(8);
    int written = 0;
    for (int i = 0; i < 20; ++i)
        if (EventRecord* r = ring.begin_write()) {
            r->type = uint8_t(EventType::counter);
            ring.end_write();
            ++written;
        }
    CHECK(written == 8);
    CHECK(ring.dropped() == 12);
    CHECK(ring.drain([](const EventRecord&) {}) == 8);
    CHECK(ring.begin_write() != nullptr);  // room again
}

TEST_CASE("recorded zones carry their context and arrive with nanosecond timestamps", "[cpu][profiler]") {
    auto data = std::make_shared<MemorySink::Data>();
    std::vector<std::unique_ptr<EventSink>> sinks;
    sinks.push_back(std::make_unique<MemorySink>(data));
    const int64_t t0 = monotonic_ns();
    start_recording(std::move(sinks), R"({"rank": 0})", {.flush_ms = 5});
    {
        US_PROF_STEP(3);
        US_PROF_PHASE(Phase::backward, 2);
        US_PROF_LAYER(5);
        US_PROF_ZONE(Lane::compute, SpanKind::op, OpClass::gemm, US_PROF_NAME("test gemm"), 1234, 99);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    record_counter(string_id("test counter"), 4.5);
    stop_recording(true);
    const int64_t t1 = monotonic_ns();
    REQUIRE(data->finished);
    CHECK(data->clean);
    CHECK(data->metadata.size() == 1);
    bool found_span = false, found_counter = false, named = false;
    for (const auto& b : data->batches) {
        for (const auto& s : b.strings) named |= s.text == "test gemm";
        for (const auto& e : b.events) {
            if (e.type == uint8_t(EventType::span) && e.span.flops == 1234) {
                found_span = true;
                CHECK(e.span.step == 3);
                CHECK(e.span.micro_batch == 2);
                CHECK(e.span.layer == 5);
                CHECK(e.span.phase == uint8_t(Phase::backward));
                CHECK(e.span.bytes == 99);
                CHECK(e.span.begin_ns >= t0 - 1000000);  // on CLOCK_MONOTONIC (within the calibration's error)
                CHECK(e.span.end_ns <= t1 + 1000000);
                CHECK(e.span.end_ns - e.span.begin_ns >= 1500000);  // slept 2 ms
            }
            if (e.type == uint8_t(EventType::counter) && e.counter.value == 4.5) found_counter = true;
        }
    }
    CHECK(found_span);
    CHECK(found_counter);
    CHECK(named);
}

TEST_CASE("chunks and trace files round-trip", "[cpu][profiler][transport]") {
    const EventBatch b = sample_batch(1000);
    const std::string encoded = encode_chunk(ChunkKind::events, 3, 7, &b, {});
    ChunkHeader h;
    std::memcpy(&h, encoded.data(), sizeof h);
    CHECK(validate_header(h).empty());
    CHECK(h.codec == 1);  // compressed
    const Chunk c = decode_chunk(h, encoded.data() + sizeof h, "test");
    CHECK(c.rank == 3);
    CHECK(c.sequence == 7);
    REQUIRE(c.events.size() == 1000);
    CHECK(std::memcmp(c.events.data(), b.events.data(), 1000 * sizeof(EventRecord)) == 0);
    CHECK(c.strings.size() == b.strings.size());

    const std::string path = temp_path("roundtrip.ustrace");
    {
        auto w = std::make_shared<TraceFileWriter>(path);
        FileSink sink(w, 0);
        sink.write_metadata(R"({"rank": 0, "world_size": 1})");
        sink.write_batch(b);
        sink.finish(true, 0);
    }
    TraceStore store;
    CHECK(load_trace(path, store).empty());
    REQUIRE(store.rank(0));
    CHECK(store.rank(0)->ended);
    CHECK(store.rank(0)->clean);
    CHECK(store.span_count() == 1000);
}

TEST_CASE("truncated, corrupted, wrong-version and foreign trace files give clear errors",
          "[cpu][profiler][transport]") {
    const std::string path = temp_path("good.ustrace");
    {
        auto w = std::make_shared<TraceFileWriter>(path);
        FileSink sink(w, 0);
        sink.write_metadata("{}");
        const EventBatch b = sample_batch(200);
        sink.write_batch(b);
        sink.write_batch(b);
        sink.finish(true, 0);
    }
    const std::string bytes = read_file(path);
    // truncated inside the last chunk: what came before is kept, with a warning that says where
    const std::string cut = temp_path("cut.ustrace");
    write_file(cut, bytes.substr(0, bytes.size() - 10));
    TraceStore store;
    const auto warnings = load_trace(cut, store);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("ends inside chunk") != std::string::npos);
    CHECK(store.span_count() == 400);
    // a flipped byte in a payload: the checksum names the chunk and its offset
    std::string flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x40;
    const std::string bad = temp_path("flipped.ustrace");
    write_file(bad, flipped);
    TraceStore s2;
    const std::string e1 = error_of([&] { load_trace(bad, s2); });
    CHECK(e1.find("at byte") != std::string::npos);
    CHECK((e1.find("checksum") != std::string::npos || e1.find("corrupt") != std::string::npos));
    // a format version this build does not know
    std::string v3 = bytes;
    v3[8] = 3;
    write_file(bad, v3);
    TraceStore s3;
    const std::string e3 = error_of([&] { load_trace(bad, s3); });
    CHECK(e3.find("version 3 trace") != std::string::npos);
    CHECK(e3.find("reads versions 1 to 2") != std::string::npos);
    // not a trace at all
    write_file(bad, "PK\x03\x04 certainly not a trace file at all");
    TraceStore s4;
    CHECK(error_of([&] { load_trace(bad, s4); }).find("not an Ultrascope trace") != std::string::npos);
    TraceStore s5;
    CHECK(error_of([&] { load_trace(temp_path("missing.ustrace"), s5); }).find("does not exist") != std::string::npos);
}

namespace {
// An encoded chunk as a writer of `version` would have sent it.
std::string as_version(std::string chunk, uint16_t version) {
    ChunkHeader h;
    std::memcpy(&h, chunk.data(), sizeof h);
    h.version = version;
    h.crc32 = chunk_checksum(h, chunk.data() + sizeof h);
    std::memcpy(chunk.data(), &h, sizeof h);
    return chunk;
}

std::string version1_file(const EventBatch& b) {
    FileHeader fh{};
    std::memcpy(fh.magic, "USTRACE", 8);
    fh.version = 1;
    return std::string(reinterpret_cast<const char*>(&fh), sizeof fh) +
           as_version(encode_chunk(ChunkKind::metadata, 0, 0, nullptr, R"({"rank": 0})"), 1) +
           as_version(encode_chunk(ChunkKind::events, 0, 1, &b, {}), 1) +
           as_version(encode_chunk(ChunkKind::end, 0, 2, nullptr, R"({"clean": true})"), 1);
}
}  // namespace

TEST_CASE("version 1 traces (before the device lanes) still read, their chunks cannot use the device lanes",
          "[cpu][profiler][transport]") {
    const std::string path = temp_path("v1.ustrace");
    write_file(path, version1_file(sample_batch(30)));
    TraceStore store;
    CHECK(load_trace(path, store).empty());
    CHECK(store.span_count() == 30);
    CHECK(store.rank(0)->clean);
    // a device-lane span in a version 1 chunk is corrupt, with a message that says why
    SyntheticRank r(0);
    r.kernel(0, 1);
    write_file(path, version1_file(r.batch()));
    TraceStore s2;
    const std::string e = error_of([&] { load_trace(path, s2); });
    CHECK(e.find("unknown lane 4 (format version 1)") != std::string::npos);
    // the same span in a current chunk is fine
    const std::string current = temp_path("v2.ustrace");
    {
        auto w = std::make_shared<TraceFileWriter>(current);
        FileSink sink(w, 0);
        sink.write_batch(r.batch());
        sink.finish(true, 0);
    }
    TraceStore s3;
    CHECK(load_trace(current, s3).empty());
    CHECK(s3.rank(0)->lanes[size_t(Lane::device)].spans().size() == 1);
}

TEST_CASE("the stream decoder reassembles split chunks and rejects garbage with its offset",
          "[cpu][profiler][transport]") {
    const EventBatch b = sample_batch(50);
    const std::string a = encode_chunk(ChunkKind::events, 0, 0, &b, {});
    const std::string stream = a + a;
    StreamDecoder d("test stream");
    int chunks = 0;
    for (size_t i = 0; i < stream.size(); i += 7) {  // arrives in 7-byte pieces
        d.feed(stream.data() + i, std::min<size_t>(7, stream.size() - i));
        while (d.next()) ++chunks;
    }
    CHECK(chunks == 2);
    StreamDecoder g("garbage stream");
    const std::string junk(100, 'x');
    g.feed(junk.data(), junk.size());
    CHECK(error_of([&] { g.next(); }).find("stream offset 0") != std::string::npos);
}

TEST_CASE("the listener takes ranks with the token and refuses the rest", "[cpu][profiler][transport]") {
    TraceListener listener("127.0.0.1", 0, random_token());
    const Endpoint at{"127.0.0.1", listener.port()};
    {
        TcpSink good(at, 1, 2, listener.token());
        REQUIRE(good.connected());
        good.write_metadata(R"({"rank": 1})");
        good.write_batch(sample_batch(10));
        good.finish(true, 0);
    }
    auto got = wait_for(listener, 5);
    int chunks = 0;
    bool connected = false, ended = false;
    for (auto& m : got) {
        connected |= m.kind == ListenerMessage::Kind::connected && m.rank == 1;
        ended |= m.kind == ListenerMessage::Kind::ended;
        chunks += m.kind == ListenerMessage::Kind::chunk;
    }
    CHECK(connected);
    CHECK(ended);
    CHECK(chunks == 3);

    TcpSink wrong(at, 0, 2, std::string(kTokenBytes, '0'));
    CHECK_FALSE(wrong.connected());
    CHECK(wrong.error().find("token") != std::string::npos);
    wrong.write_batch(sample_batch(10));  // dropped, no stall
    CHECK(wrong.dropped_events() == 10);

    // garbage instead of a hello
    std::string why;
    Socket raw = connect_to(at, 2000, why);
    REQUIRE(raw.valid());
    const std::string junk(64, 'z');
    send_all(raw.fd(), junk.data(), junk.size(), 1000);
    auto refusals = wait_for(listener, 2);
    bool refused = false;
    for (auto& m : refusals) refused |= m.kind == ListenerMessage::Kind::refused;
    CHECK(refused);
}

TEST_CASE("a rank keeps going when nobody listens or the listener goes away", "[cpu][profiler][transport]") {
    int port = 0;
    { Socket s = listen_on("127.0.0.1", 0, port); }  // a port that is now closed
    TcpSink nobody({"127.0.0.1", port}, 0, 1, random_token(), 1 << 20, 500);
    CHECK_FALSE(nobody.connected());
    CHECK(nobody.error().find("cannot connect") != std::string::npos);

    auto listener = std::make_unique<TraceListener>("127.0.0.1", 0, random_token());
    TcpSink sink({"127.0.0.1", listener->port()}, 0, 1, listener->token(), 1 << 20);
    REQUIRE(sink.connected());
    listener.reset();  // gone mid-run
    const EventBatch big = sample_batch(20000);
    for (int i = 0; i < 20; ++i) sink.write_batch(big);  // returns at once: queued or dropped, never blocks
    sink.finish(false, 0);                               // bounded: the sender gives up on a dead peer
    CHECK(sink.dropped_events() > 0);
}

TEST_CASE("unauthenticated peers cost the listener little: waiting handshakes are capped, refusals are not a flood",
          "[cpu][profiler][transport]") {
    TraceListener listener("127.0.0.1", 0, random_token());
    CHECK(listener.port() > 0);
    const Endpoint at{"127.0.0.1", listener.port()};
    // 40 peers connect and say nothing: 32 wait for their hello (64 bytes each, 5 s at most), the rest are closed.
    std::vector<Socket> silent;
    std::string why;
    for (int i = 0; i < 40; ++i) {
        silent.push_back(connect_to(at, 2000, why));
        REQUIRE(silent.back().valid());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    int closed_by_listener = 0;
    for (auto& s : silent) {
        char c;
        set_nonblocking(s.fd(), true);
        closed_by_listener += ::recv(s.fd(), &c, 1, 0) == 0;  // end of stream: the listener closed it
    }
    CHECK(closed_by_listener == 8);
    silent.clear();  // their slots free up (they count as refusals too: closed before the handshake)
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // 100 peers with the wrong token: every one refused, but the log gets at most a few dozen lines.
    for (int i = 0; i < 100; ++i) {
        Socket s = connect_to(at, 2000, why);
        REQUIRE(s.valid());
        Hello h = make_hello(0, 1, std::string(kTokenBytes, '0'));
        send_all(s.fd(), reinterpret_cast<const char*>(&h), sizeof h, 1000);
        Welcome w{};
        REQUIRE(recv_exact(s.fd(), reinterpret_cast<char*>(&w), sizeof w, 7000));
        CHECK(w.status == uint16_t(WelcomeStatus::bad_token));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto messages = wait_for(listener, 1);
    size_t refused = 0;
    for (const auto& m : messages) refused += m.kind == ListenerMessage::Kind::refused;
    // 140 refusals: the first 20 one by one, then the counts at 32, 64 and 128
    CHECK(refused == 23);
    // and a rank with the token still gets in
    TcpSink good(at, 0, 1, listener.token());
    CHECK(good.connected());
    good.finish(true, 0);
}

TEST_CASE("the handshake reader takes the hello in any pieces and decides once", "[cpu][profiler][transport]") {
    const std::string token = random_token();
    const Hello h = make_hello(3, 4, token);
    const std::string bytes = std::string(reinterpret_cast<const char*>(&h), sizeof h) + "stream bytes";
    HandshakeReader reader(token);
    size_t used = 0;
    for (size_t pos = 0; pos < bytes.size() && !reader.complete(); pos += 5)
        used += reader.feed(bytes.data() + pos, std::min<size_t>(5, bytes.size() - pos));
    REQUIRE(reader.complete());
    CHECK(used == sizeof(Hello));  // nothing of the stream is taken
    CHECK(reader.status() == WelcomeStatus::accepted);
    CHECK(reader.rank() == 3);
    HandshakeReader wrong(std::string(kTokenBytes, 'b'));
    wrong.feed(bytes.data(), bytes.size());
    CHECK(wrong.status() == WelcomeStatus::bad_token);
    Hello old = h;
    old.version = 99;
    HandshakeReader versioned(token);
    versioned.feed(reinterpret_cast<const char*>(&old), sizeof old);
    CHECK(versioned.status() == WelcomeStatus::bad_version);
    CHECK(versioned.problem().find("version 99") != std::string::npos);
}
