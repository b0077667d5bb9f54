#include "profiler/transport/listener.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "common/core/check.h"
#include "profiler/transport/protocol.h"

namespace us::prof {

namespace {
constexpr int kHelloTimeoutMs = 5000;
// What an unauthenticated peer can cost: at most this many connections waiting for their hello (64 bytes each);
// beyond it, new connections are closed at once. Refusals are reported one by one up to kRefusalsReported, then
// counted, so that a port scan cannot flood the GUI's log.
constexpr size_t kMaxPendingHandshakes = 32;
constexpr uint64_t kRefusalsReported = 20;
int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

struct TraceListener::Connection {
    Socket socket;
    std::string peer;
    int64_t accepted_ms = 0;
    bool welcomed = false;
    int rank = -1;
    bool ended = false;
    std::unique_ptr<HandshakeReader> handshake;
    std::unique_ptr<StreamDecoder> decoder;
};

TraceListener::TraceListener(const std::string& host, int port, std::string token)
    : m_host(host), m_token(std::move(token)) {
    m_listen = listen_on(host, port, m_port);
    US_CHECK_INPUT(::pipe2(m_wake_pipe, O_CLOEXEC | O_NONBLOCK) == 0, "cannot create a pipe: {}", std::strerror(errno));
    m_thread = std::thread([this] { loop(); });
}

TraceListener::~TraceListener() {
    m_stop = true;
    const char c = 1;
    [[maybe_unused]] auto w = ::write(m_wake_pipe[1], &c, 1);
    if (m_thread.joinable()) m_thread.join();
    ::close(m_wake_pipe[0]);
    ::close(m_wake_pipe[1]);
}

void TraceListener::poll(std::vector<ListenerMessage>& out) {
    std::lock_guard lock(m_mutex);
    for (auto& m : m_inbox) out.push_back(std::move(m));
    m_inbox.clear();
}

// The listener thread's state between polls, and its steps: accept, read, drop, hand over.
struct TraceListener::Round {
    TraceListener& listener;
    std::vector<std::unique_ptr<Connection>> conns;
    std::vector<ListenerMessage> pending;
    uint64_t refusals = 0;
    char buffer[1 << 16];

    void post(ListenerMessage m) { pending.push_back(std::move(m)); }

    void refuse(const std::string& text) {
        ++refusals;
        if (refusals <= kRefusalsReported)
            post({ListenerMessage::Kind::refused, -1, {}, {}, text});
        else if ((refusals & (refusals - 1)) == 0)  // 32, 64, 128, ...: still said, not flooded
            post({ListenerMessage::Kind::refused,
                  -1,
                  {},
                  {},
                  fmt::format("{} connections refused so far (the latest: {})", refusals, text)});
    }

    void drop(Connection& c, const std::string& why) {
        if (c.welcomed && !c.ended)
            post({ListenerMessage::Kind::lost, c.rank, {}, {}, why});
        else if (!c.welcomed)
            refuse(fmt::format("{}: {}", c.peer, why));
        c.socket.close();
    }

    // New connections, each waiting for its handshake; beyond kMaxPendingHandshakes waiting, closed at once.
    void accept_new() {
        for (;;) {
            sockaddr_storage addr{};
            socklen_t len = sizeof addr;
            const int fd = ::accept4(listener.m_listen.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
            if (fd < 0) break;
            const size_t pending_handshakes =
                size_t(std::count_if(conns.begin(), conns.end(), [](const auto& c) { return !c->welcomed; }));
            if (pending_handshakes >= kMaxPendingHandshakes) {
                ::close(fd);
                refuse(fmt::format("a connection: {} others are already waiting for their handshake",
                                   kMaxPendingHandshakes));
                continue;
            }
            set_nonblocking(fd, true);
            auto c = std::make_unique<Connection>();
            c->socket = Socket(fd);
            c->peer = fmt::format("connection {}", fd);
            c->accepted_ms = now_ms();
            c->handshake = std::make_unique<HandshakeReader>(listener.m_token);
            conns.push_back(std::move(c));
        }
    }

    // The handshake's bytes at the start of `n` read; once it is whole, the peer is welcomed (or dropped). Returns
    // the bytes it used, and false when the connection is done with.
    bool handshake(Connection& c, ssize_t n, size_t& used) {
        used = c.handshake->feed(buffer, size_t(n));
        if (!c.handshake->complete()) return true;
        const Welcome w = make_welcome(c.handshake->status());
        send_all(c.socket.fd(), reinterpret_cast<const char*>(&w), sizeof w, 1000);
        if (c.handshake->status() != WelcomeStatus::accepted) {
            drop(c, c.handshake->problem());
            return false;
        }
        c.welcomed = true;
        c.rank = int(c.handshake->rank());
        c.handshake.reset();
        c.peer = fmt::format("rank {}", c.rank);
        c.decoder = std::make_unique<StreamDecoder>(fmt::format("live stream of rank {}", c.rank));
        post({ListenerMessage::Kind::connected, c.rank, {}, {}, {}});
        return true;
    }

    // Everything the connection has to read now: its handshake, then its chunks, each posted as it decodes.
    void read_from(Connection& c) {
        for (;;) {
            const ssize_t n = ::recv(c.socket.fd(), buffer, sizeof buffer, 0);
            if (n == 0) {
                drop(c, c.welcomed ? "the connection closed before the rank's end of stream"
                                   : "the peer closed before the handshake");
                return;
            }
            if (n < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    drop(c, fmt::format("the connection broke: {}", std::strerror(errno)));
                return;
            }
            size_t used = 0;
            if (!c.welcomed) {
                if (!handshake(c, n, used)) return;
                if (!c.welcomed) continue;
            }
            if (size_t(n) > used) c.decoder->feed(buffer + used, size_t(n) - used);
            try {
                while (auto chunk = c.decoder->next()) {
                    const bool end = chunk->kind == ChunkKind::end;
                    post({ListenerMessage::Kind::chunk, c.rank, std::move(*chunk), c.decoder->last_raw(), {}});
                    if (end) {
                        c.ended = true;
                        post({ListenerMessage::Kind::ended, c.rank, {}, {}, {}});
                    }
                }
            } catch (const UserError& e) {
                drop(c, e.what());
                return;
            }
        }
    }

    // Peers that never say hello are dropped after a timeout, so a stray connection cannot pin a slot; closed
    // connections are let go.
    void let_go() {
        for (auto& c : conns)
            if (c->socket.valid() && !c->welcomed && now_ms() - c->accepted_ms > kHelloTimeoutMs)
                drop(*c, "no handshake within 5 s");
        std::erase_if(conns, [](const auto& c) { return !c->socket.valid(); });
    }

    void hand_over() {
        if (pending.empty()) return;
        std::lock_guard lock(listener.m_mutex);
        for (auto& m : pending) listener.m_inbox.push_back(std::move(m));
        pending.clear();
    }
};

void TraceListener::loop() {
    Round round{*this};
    while (!m_stop) {
        std::vector<pollfd> fds;
        fds.push_back({m_listen.fd(), POLLIN, 0});
        fds.push_back({m_wake_pipe[0], POLLIN, 0});
        for (auto& c : round.conns) fds.push_back({c->socket.fd(), POLLIN, 0});
        ::poll(fds.data(), fds.size(), 200);
        if (m_stop) break;
        if (fds[0].revents & POLLIN) round.accept_new();
        const size_t polled = fds.size() - 2;  // connections accepted above are read from the next round
        for (size_t i = 0; i < polled; ++i)
            if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) round.read_from(*round.conns[i]);
        round.let_go();
        round.hand_over();
    }
}

}  // namespace us::prof
