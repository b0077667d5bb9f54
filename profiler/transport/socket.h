// Small POSIX socket helpers for the live stream: parsing HOST:PORT, connecting with a timeout, listening, and
// reading/writing with deadlines so that no caller can hang on a peer that went away.
#pragma once

#include <cstdint>
#include <string>

namespace us::prof {

struct Endpoint {
    std::string host;
    int port = 0;
};

// "HOST:PORT" (IPv4 or a name). UserError when malformed.
Endpoint parse_endpoint(const std::string& text);

// Owns a file descriptor.
class Socket {
public:
    Socket() = default;
    explicit Socket(int fd) : m_fd(fd) {}
    Socket(Socket&& o) noexcept : m_fd(o.release()) {}
    Socket& operator=(Socket&& o) noexcept;
    ~Socket() { close(); }
    int fd() const { return m_fd; }
    bool valid() const { return m_fd >= 0; }
    int release() {
        const int fd = m_fd;
        m_fd = -1;
        return fd;
    }
    void close();

private:
    int m_fd = -1;
};

// Connects within timeout_ms; on failure returns an invalid socket and sets `error`.
Socket connect_to(const Endpoint& where, int timeout_ms, std::string& error);
// Binds and listens (port 0: any free port); UserError naming the address when that fails.
Socket listen_on(const std::string& host, int port, int& bound_port);

// Sends all bytes or fails by the deadline (false). Never blocks past timeout_ms in total.
bool send_all(int fd, const char* data, size_t n, int timeout_ms);
// Receives exactly n bytes by the deadline (false on timeout, error or closed connection).
bool recv_exact(int fd, char* data, size_t n, int timeout_ms);
void set_nonblocking(int fd, bool on);

}  // namespace us::prof
