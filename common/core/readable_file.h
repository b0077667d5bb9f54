// Whether a file a run reads (--load, --data) can be read, asked before anything is written: the trainer opens its
// trace before it reads them, and `ultrascope run` writes its trace as it launches; a mistyped path must not cost
// the trace an earlier run left there.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace us {

// "" where `path` is a regular file that opens for reading, else why not in words.
inline std::string why_not_readable_file(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return "no such file";
    if (std::filesystem::is_directory(path, ec)) return "it is a folder: give a file";
    if (!std::filesystem::is_regular_file(path, ec)) return "not a file";
    if (!std::ifstream(path).good()) return "it cannot be opened for reading";
    return "";
}

}  // namespace us
