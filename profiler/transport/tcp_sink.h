// The live stream's sending side: a sink that encodes batches into chunks and queues them for its own sender
// thread. The queue is bounded; when the listener is slow or gone, chunks are dropped and counted (the count
// travels in later chunks and in the end note), so training never waits on the network.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "profiler/event.h"
#include "profiler/transport/socket.h"

namespace us::prof {

class TcpSink final : public EventSink {
public:
    // Connects and shakes hands within connect_timeout_ms. On failure the sink stays open but drops everything;
    // connected() is false and error() says why.
    TcpSink(const Endpoint& where, uint32_t rank, uint32_t world, const std::string& token,
            size_t max_queue_bytes = size_t(64) << 20, int connect_timeout_ms = 3000);
    ~TcpSink() override;

    bool connected() const { return m_connected.load(); }
    const std::string& error() const { return m_error; }
    uint64_t dropped_events() const { return m_dropped_events.load(); }

    void write_metadata(const std::string& json) override;
    void write_batch(const EventBatch& batch) override;
    void finish(bool clean, uint64_t dropped_total, const std::string& reason = {}) override;
    void write_flight_dump(const std::string& pickle) override;

private:
    void enqueue(std::string chunk, uint64_t events);
    void send_loop();

    uint32_t m_rank;
    uint32_t m_sequence = 0;
    size_t m_max_queue_bytes;
    Socket m_socket;
    std::string m_error;
    std::atomic<bool> m_connected{false};
    std::atomic<uint64_t> m_dropped_events{0};
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::string> m_queue;
    size_t m_queue_bytes = 0;
    bool m_closing = false;
    std::thread m_sender;
};

}  // namespace us::prof
