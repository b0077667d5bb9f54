// This node's end of Kineto's daemon protocol: the datagram socket named "dynolog", abstract ("\0dynolog\0", the
// trailing NUL counted as Kineto counts it) or $KINETO_IPC_SOCKET_DIR/dynolog. One process per network namespace
// (or per socket directory) can own the name; when a dynolog or another agent holds it, binding fails with a
// message that says so and what to do.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>

#include "common/core/check.h"

namespace us::prof {

// Where the name lives: "" for the abstract name, else the directory of the socket file.
std::string ipc_socket_dir_from_env();                                // $KINETO_IPC_SOCKET_DIR
std::string ipc_endpoint_description(const std::string& socket_dir);  // "@dynolog" or "DIR/dynolog"

// Thrown when the name is held by a live process (a dynolog, an `ultrascope agent`, a capture).
class IpcNameTaken : public UserError {
public:
    using UserError::UserError;
};

struct IpcPeer {  // a sender's address, to answer it
    sockaddr_un addr{};
    socklen_t len = 0;
};

class IpcEndpoint {
public:
    // Binds the name now. IpcNameTaken when a live process holds it; UserError for other failures. A socket file
    // left by a process that died is replaced.
    explicit IpcEndpoint(std::string socket_dir);
    ~IpcEndpoint();
    IpcEndpoint(const IpcEndpoint&) = delete;
    IpcEndpoint& operator=(const IpcEndpoint&) = delete;

    // Waits up to timeout_ms for one datagram (true) or returns false; a datagram larger than the buffer is cut,
    // which the decoder then refuses.
    bool receive(std::string& bytes, IpcPeer& from, int timeout_ms);
    // Answers a sender without blocking; false when it is gone or its queue is full.
    bool reply(const IpcPeer& to, const std::string& bytes);
    const std::string& description() const { return m_description; }
    int fd() const { return m_fd; }

private:
    std::string m_dir;
    std::string m_path;  // the socket file when not abstract
    std::string m_description;
    int m_fd = -1;
};

// Sends one datagram to the node's "dynolog" name (as Kineto does) and waits up to timeout_ms for the answer:
// for tests, the replay and probing whether something answers there. Empty optional-like: returns false on no answer.
bool ipc_send_and_receive(const std::string& socket_dir, const std::string& bytes, std::string& answer, int timeout_ms);

}  // namespace us::prof
