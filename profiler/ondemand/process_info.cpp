// /proc readers for the processes that poll the daemon (process_info.h).
#include "profiler/ondemand/process_info.h"

#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace us::prof {
namespace {

int to_int(const std::string& s, int fallback) {
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size() ? v : fallback;
}

bool read_file(const std::string& path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
}

}  // namespace

std::string environ_value(const std::string& block, const std::string& name) {
    const std::string key = name + "=";
    size_t pos = 0;
    while (pos < block.size()) {
        size_t end = block.find('\0', pos);
        if (end == std::string::npos) end = block.size();
        if (block.compare(pos, key.size(), key) == 0 && end - pos >= key.size())
            return block.substr(pos + key.size(), end - pos - key.size());
        pos = end + 1;
    }
    return "";
}

ProcessInfo read_process_info(int pid) {
    ProcessInfo info;
    std::string block;
    if (!read_file("/proc/" + std::to_string(pid) + "/environ", block)) return info;
    info.readable = true;
    info.rank = to_int(environ_value(block, "RANK"), -1);
    info.world_size = to_int(environ_value(block, "WORLD_SIZE"), 0);
    info.local_rank = to_int(environ_value(block, "LOCAL_RANK"), -1);
    info.local_world_size = to_int(environ_value(block, "LOCAL_WORLD_SIZE"), 0);
    info.trace_dir = environ_value(block, "KINETO_ONDEMAND_TRACE_DIR");
    std::string comm;
    if (read_file("/proc/" + std::to_string(pid) + "/comm", comm)) {
        while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
        info.command = comm;
    }
    // torchrun's agent polls before its workers do: known by its command line, it is never taken for a rank.
    std::string cmdline;
    if (info.rank < 0 && read_file("/proc/" + std::to_string(pid) + "/cmdline", cmdline))
        info.launcher_command = cmdline.find("torchrun") != std::string::npos ||
                                cmdline.find("torch.distributed.run") != std::string::npos ||
                                cmdline.find("torch.distributed.launch") != std::string::npos;
    return info;
}

bool process_alive(int pid) {
    std::string stat;
    if (pid <= 0 || !read_file("/proc/" + std::to_string(pid) + "/stat", stat)) return false;
    // The state follows the command in parentheses, which may itself hold ") ".
    const size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

}  // namespace us::prof
