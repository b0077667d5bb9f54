#include "common/core/writable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace us {

std::string why_not_writable_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "it is a folder: give a file's name";
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) return "";  // a crashed run's leftover: the folder takes files
    if (fd < 0) return std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return "";
}

}  // namespace us
