// The "dynolog" datagram socket (ipc_endpoint.h).
#include "profiler/ondemand/ipc_endpoint.h"

#include <fmt/core.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace us::prof {
namespace {

constexpr const char* kName = "dynolog";

// The address Kineto sends to: abstract "\0dynolog\0" (length counts both NULs' worth as Kineto does), or a path.
socklen_t make_address(const std::string& dir, sockaddr_un& addr) {
    addr = {};
    addr.sun_family = AF_UNIX;
    if (dir.empty()) {
        std::memcpy(addr.sun_path + 1, kName, std::strlen(kName));
        return socklen_t(sizeof(sa_family_t) + std::strlen(kName) + 2);
    }
    const std::string path = dir + "/" + kName;
    US_CHECK_INPUT(path.size() < sizeof(addr.sun_path), "KINETO_IPC_SOCKET_DIR is too long for a socket path: {}", dir);
    std::memcpy(addr.sun_path, path.data(), path.size());
    return socklen_t(sizeof(sa_family_t) + path.size() + 1);
}

int datagram_socket() {
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    US_CHECK_INPUT(fd >= 0, "cannot create a Unix datagram socket: {}", std::strerror(errno));
    return fd;
}

// A socket file answers connect() only while its owner lives.
bool socket_file_live(const sockaddr_un& addr, socklen_t len) {
    const int fd = datagram_socket();
    const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0;
    ::close(fd);
    return live;
}

std::string taken_message(const std::string& description) {
    return fmt::format(
        "the Kineto daemon name {} on this node is taken: a dynolog daemon or an `ultrascope agent` (or another "
        "`ultrascope capture`) owns it. Use the agent that runs there (`ultrascope capture --agents HOST:PORT`), "
        "stop what owns the name, or give this job and the agent a directory of their own with "
        "KINETO_IPC_SOCKET_DIR=DIR (docs/attach-pytorch.md)",
        description);
}

}  // namespace

std::string ipc_socket_dir_from_env() {
    const char* dir = std::getenv("KINETO_IPC_SOCKET_DIR");
    return dir && *dir ? std::string(dir) : std::string();
}

std::string ipc_endpoint_description(const std::string& socket_dir) {
    return socket_dir.empty() ? std::string("@dynolog (abstract)") : socket_dir + "/" + kName;
}

IpcEndpoint::IpcEndpoint(std::string socket_dir) : m_dir(std::move(socket_dir)) {
    m_description = ipc_endpoint_description(m_dir);
    sockaddr_un addr;
    const socklen_t len = make_address(m_dir, addr);
    m_fd = datagram_socket();
    int rc = ::bind(m_fd, reinterpret_cast<const sockaddr*>(&addr), len);
    if (rc != 0 && errno == EADDRINUSE && !m_dir.empty() && !socket_file_live(addr, len)) {
        ::unlink(addr.sun_path);  // left by a daemon that died
        rc = ::bind(m_fd, reinterpret_cast<const sockaddr*>(&addr), len);
    }
    if (rc != 0) {
        const int err = errno;
        ::close(m_fd);
        m_fd = -1;
        if (err == EADDRINUSE) throw IpcNameTaken(taken_message(m_description));
        fail_user("cannot bind the Kineto daemon socket {}: {}", m_description, std::strerror(err));
    }
    if (!m_dir.empty()) {
        m_path = addr.sun_path;
        ::chmod(m_path.c_str(), 0666);  // jobs of other users on the node poll it too, as with dynolog
    }
}

IpcEndpoint::~IpcEndpoint() {
    if (m_fd >= 0) ::close(m_fd);
    if (!m_path.empty()) ::unlink(m_path.c_str());
}

bool IpcEndpoint::receive(std::string& bytes, IpcPeer& from, int timeout_ms) {
    pollfd p{m_fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0 || !(p.revents & POLLIN)) return false;
    bytes.resize(65536 + 1);
    from = {};
    from.len = sizeof(from.addr);
    const ssize_t n =
        ::recvfrom(m_fd, bytes.data(), bytes.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from.addr), &from.len);
    if (n < 0) return false;
    bytes.resize(size_t(n));
    return true;
}

bool IpcEndpoint::reply(const IpcPeer& to, const std::string& bytes) {
    if (to.len <= sizeof(sa_family_t)) return false;  // an unbound sender cannot be answered
    return ::sendto(m_fd, bytes.data(), bytes.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to.addr),
                    to.len) == ssize_t(bytes.size());
}

bool ipc_send_and_receive(const std::string& socket_dir, const std::string& bytes, std::string& answer,
                          int timeout_ms) {
    const int fd = datagram_socket();
    sockaddr_un self{};
    self.sun_family = AF_UNIX;  // autobind: an abstract name of the kernel's choosing, so the answer can come back
    bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&self), sizeof(sa_family_t)) == 0;
    sockaddr_un to;
    const socklen_t len = make_address(socket_dir, to);
    ok = ok && ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), len) ==
                   ssize_t(bytes.size());
    pollfd p{fd, POLLIN, 0};
    ok = ok && ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
    if (ok) {
        answer.resize(65536);
        const ssize_t n = ::recv(fd, answer.data(), answer.size(), MSG_DONTWAIT);
        ok = n >= 0;
        answer.resize(ok ? size_t(n) : 0);
    }
    ::close(fd);
    return ok;
}

}  // namespace us::prof
