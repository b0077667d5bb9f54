// The live stream's receiving side: listens (on 127.0.0.1 unless told otherwise), accepts ranks that present the
// run's token, reassembles their chunks on a background thread, and hands everything to the consumer through
// poll() so the consumer (the GUI's frame loop, `ultrascope run`) never blocks on the network. A peer that sends
// garbage, the wrong token or nothing at all is dropped with a message that says what was wrong.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/transport/chunk.h"
#include "profiler/transport/socket.h"

namespace us::prof {

struct ListenerMessage {
    enum class Kind {
        connected,  // a rank shook hands
        chunk,      // a chunk from a rank (raw holds its bytes, for writing a trace file)
        ended,      // a rank sent its end chunk and closed
        lost,       // a rank's connection closed or broke before its end chunk
        refused,    // a peer failed the handshake (text says why)
    };
    Kind kind;
    int rank = -1;
    Chunk chunk;
    std::string raw;
    std::string text;
};

class TraceListener {
public:
    // Binds now; UserError when the address cannot be used. port 0 picks a free port.
    TraceListener(const std::string& host, int port, std::string token);
    ~TraceListener();
    TraceListener(const TraceListener&) = delete;
    TraceListener& operator=(const TraceListener&) = delete;

    int port() const { return m_port; }
    const std::string& host() const { return m_host; }
    const std::string& token() const { return m_token; }
    // Appends what arrived since the last call; never blocks.
    void poll(std::vector<ListenerMessage>& out);

private:
    struct Connection;
    struct Round;  // the listener thread's state: its connections, and what it has to say (listener.cpp)
    void loop();

    std::string m_host;
    int m_port = 0;
    std::string m_token;
    Socket m_listen;
    int m_wake_pipe[2] = {-1, -1};
    std::atomic<bool> m_stop{false};
    std::mutex m_mutex;
    std::vector<ListenerMessage> m_inbox;
    std::thread m_thread;
};

}  // namespace us::prof
