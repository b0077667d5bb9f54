// Whether a file a run reads (--load, --data) can be read, asked before anything is written: the trainer opens its
// trace before it reads them, and `ultrascope run` writes its trace as it launches; a mistyped path must not cost
// the trace an earlier run left there.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace us {

// "" where `path` is a file that opens for reading, or a pipe (`--data <(zcat corpus.gz)`: not opened here, which
// would take its bytes from the reader), else why not in words.
inline std::string why_not_readable_file(const std::string& path) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) return ec.message();  // a folder on the way not searchable
    if (!std::filesystem::exists(status)) return "no such file";
    if (std::filesystem::is_directory(status)) return "it is a folder: give a file";
    if (!std::filesystem::is_regular_file(status)) return "";  // a pipe or a device: its reader will say
    if (!std::ifstream(path).good()) return "it cannot be opened for reading";
    return "";
}

}  // namespace us
