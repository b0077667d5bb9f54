#include "profiler/transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/core/check.h"

namespace us::prof {

namespace {
int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

bool resolve(const std::string& host, int port, sockaddr_in& addr) {
    addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return true;
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
    addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return true;
}
}  // namespace

Endpoint parse_endpoint(const std::string& text) {
    const size_t colon = text.rfind(':');
    US_CHECK_INPUT(colon != std::string::npos && colon > 0 && colon + 1 < text.size(),
                   "'{}' is not HOST:PORT (for example 127.0.0.1:7777)", text);
    Endpoint e;
    e.host = text.substr(0, colon);
    try {
        size_t used = 0;
        e.port = std::stoi(text.substr(colon + 1), &used);
        US_CHECK_INPUT(used == text.size() - colon - 1, "'{}': the port is not a number", text);
    } catch (const std::logic_error&) {
        fail_user("'{}': the port is not a number", text);
    }
    US_CHECK_INPUT(e.port > 0 && e.port < 65536, "'{}': port {} is out of range 1..65535", text, e.port);
    return e;
}

Socket& Socket::operator=(Socket&& o) noexcept {
    if (this != &o) {
        close();
        m_fd = o.release();
    }
    return *this;
}

void Socket::close() {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
}

void set_nonblocking(int fd, bool on) {
    const int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

Socket connect_to(const Endpoint& where, int timeout_ms, std::string& error) {
    sockaddr_in addr;
    if (!resolve(where.host, where.port, addr)) {
        error = "cannot resolve host '" + where.host + "'";
        return {};
    }
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
        error = std::strerror(errno);
        return {};
    }
    set_nonblocking(s.fd(), true);
    if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
        error = std::strerror(errno);
        return {};
    }
    pollfd p{s.fd(), POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) != 1) {
        error = "timed out";
        return {};
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        error = std::strerror(err);
        return {};
    }
    const int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
}

Socket listen_on(const std::string& host, int port, int& bound_port) {
    sockaddr_in addr;
    US_CHECK_INPUT(resolve(host, port, addr), "cannot resolve listen address '{}'", host);
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    US_CHECK_INPUT(s.valid(), "cannot create a socket: {}", std::strerror(errno));
    const int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    US_CHECK_INPUT(::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0,
                   "cannot listen on {}:{}: {} (is another listener there? pick another --port)", host, port,
                   std::strerror(errno));
    US_CHECK_INPUT(::listen(s.fd(), 64) == 0, "cannot listen on {}:{}: {}", host, port, std::strerror(errno));
    socklen_t len = sizeof addr;
    getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = ntohs(addr.sin_port);
    set_nonblocking(s.fd(), true);
    return s;
}

bool send_all(int fd, const char* data, size_t n, int timeout_ms) {
    const int64_t deadline = now_ms() + timeout_ms;
    while (n > 0) {
        const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            data += w;
            n -= size_t(w);
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        const int64_t left = deadline - now_ms();
        if (left <= 0) return false;
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, int(left)) < 0 && errno != EINTR) return false;
    }
    return true;
}

bool recv_exact(int fd, char* data, size_t n, int timeout_ms) {
    const int64_t deadline = now_ms() + timeout_ms;
    while (n > 0) {
        const ssize_t r = ::recv(fd, data, n, MSG_DONTWAIT);
        if (r > 0) {
            data += r;
            n -= size_t(r);
            continue;
        }
        if (r == 0) return false;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        const int64_t left = deadline - now_ms();
        if (left <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, int(left)) < 0 && errno != EINTR) return false;
    }
    return true;
}

}  // namespace us::prof
