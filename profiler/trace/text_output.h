// Text streamed to a plain or a gzip file, for the exporters (Chrome trace JSON, Kineto JSON): they write to a
// temporary name and rename it only when close() says every write succeeded, so nothing is left half-written.
#pragma once

#include <zlib.h>

#include <cstdio>
#include <string>

namespace us::prof {

class TextOutput {
public:
    // UserError when the file cannot be created.
    TextOutput(const std::string& path, bool gz);
    ~TextOutput() { close(); }
    TextOutput(const TextOutput&) = delete;
    TextOutput& operator=(const TextOutput&) = delete;
    void write(const std::string& s);
    bool close();  // whether every write (and the close itself) succeeded

private:
    bool m_gz;
    gzFile m_gzfile = nullptr;
    std::FILE* m_file = nullptr;
    bool m_ok = true;
};

}  // namespace us::prof
