#include "profiler/transport/tcp_sink.h"

#include <fmt/format.h>

#include "profiler/transport/chunk.h"
#include "profiler/transport/protocol.h"

namespace us::prof {

TcpSink::TcpSink(const Endpoint& where, uint32_t rank, uint32_t world, const std::string& token, size_t max_queue_bytes,
                 int connect_timeout_ms)
    : m_rank(rank), m_max_queue_bytes(max_queue_bytes) {
    std::string why;
    m_socket = connect_to(where, connect_timeout_ms, why);
    if (!m_socket.valid()) {
        m_error = fmt::format("cannot connect to {}:{}: {}", where.host, where.port, why);
        return;
    }
    const Hello hello = make_hello(rank, world, token);
    Welcome welcome{};
    if (!send_all(m_socket.fd(), reinterpret_cast<const char*>(&hello), sizeof hello, connect_timeout_ms) ||
        !recv_exact(m_socket.fd(), reinterpret_cast<char*>(&welcome), sizeof welcome, connect_timeout_ms)) {
        m_error = fmt::format("{}:{} did not answer the handshake", where.host, where.port);
        m_socket.close();
        return;
    }
    if (std::string(welcome.magic, 4) != "USOK" || welcome.status != uint16_t(WelcomeStatus::accepted)) {
        m_error = fmt::format("{}:{} {}", where.host, where.port, welcome_status_text(welcome.status));
        m_socket.close();
        return;
    }
    m_connected = true;
    m_sender = std::thread([this] { send_loop(); });
}

TcpSink::~TcpSink() {
    {
        std::lock_guard lock(m_mutex);
        m_closing = true;
    }
    m_cv.notify_all();
    if (m_sender.joinable()) m_sender.join();
}

void TcpSink::enqueue(std::string chunk, uint64_t events) {
    std::lock_guard lock(m_mutex);
    if (!m_connected || m_queue_bytes + chunk.size() > m_max_queue_bytes) {
        m_dropped_events += events;
        return;
    }
    m_queue_bytes += chunk.size();
    m_queue.push_back(std::move(chunk));
    m_cv.notify_one();
}

void TcpSink::write_metadata(const std::string& json) {
    enqueue(encode_chunk(ChunkKind::metadata, m_rank, m_sequence++, nullptr, json), 0);
}

void TcpSink::write_batch(const EventBatch& batch) {
    if (!m_connected) {
        m_dropped_events += batch.events.size();
        return;
    }
    EventBatch b = batch;  // the receiver learns about this sink's own drops too
    b.dropped_total += m_dropped_events.load();
    enqueue(encode_chunk(ChunkKind::events, m_rank, m_sequence++, &b, {}), batch.events.size());
}

void TcpSink::write_flight_dump(const std::string& pickle) {
    enqueue(encode_chunk(ChunkKind::flight_dump, m_rank, m_sequence++, nullptr, pickle), 0);
}

void TcpSink::finish(bool clean, uint64_t dropped_total, const std::string& reason) {
    const std::string note = end_note_json(clean, dropped_total + m_dropped_events.load(), reason);
    enqueue(encode_chunk(ChunkKind::end, m_rank, m_sequence++, nullptr, note), 0);
    {
        std::unique_lock lock(m_mutex);
        m_closing = true;
        m_cv.notify_all();
    }
    if (m_sender.joinable()) m_sender.join();
    m_socket.close();
}

// Sends queued chunks; gives up on the connection when a send makes no progress for 5 s (the listener is gone or
// stuck), after which everything is dropped and counted.
void TcpSink::send_loop() {
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [&] { return m_closing || !m_queue.empty(); });
        if (m_queue.empty()) return;  // closing and drained
        std::string chunk = std::move(m_queue.front());
        m_queue.pop_front();
        m_queue_bytes -= chunk.size();
        lock.unlock();
        const bool ok = send_all(m_socket.fd(), chunk.data(), chunk.size(), 5000);
        lock.lock();
        if (!ok) {
            m_connected = false;
            m_queue.clear();
            m_queue_bytes = 0;
            return;
        }
    }
}

}  // namespace us::prof
