// A forward-only JSON reader over a ByteSource: it walks the outer object key by key and hands out each value as
// the text of one complete JSON value, held in a buffer that only grows to the largest single value (one trace
// event, or the small metadata objects), never to the file. The Kineto reader parses the events' text itself
// (kineto_event.h); nothing here builds a document tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/import/byte_source.h"

namespace us::prof {

class JsonStream {
public:
    // `max_value_bytes`: the largest single value accepted (a longer one is refused as damaged input).
    explicit JsonStream(ByteSource& source, size_t max_value_bytes = size_t(64) << 20);

    // The next non-blank character without consuming it; 0 at the end of the input.
    char peek();
    // Consumes `c` (after blanks) or throws UserError saying `context` and what was found instead.
    void expect(char c, const char* context);
    // Consumes `c` if it comes next (after blanks).
    bool accept(char c);
    // Reads a string (after blanks) into `out`, escapes decoded.
    void read_string(std::string& out, const char* context);
    // The text of the next complete value (after blanks); valid until the next call.
    std::string_view value(const char* context);

    uint64_t offset() const { return m_consumed + m_pos; }  // bytes of JSON consumed so far
    const std::string& name() const { return m_source.name(); }
    [[noreturn]] void fail(const std::string& what) const;

private:
    bool fill();  // reads more bytes, keeping [m_pos, m_end); false at the end of input
    void skip_blanks();

    ByteSource& m_source;
    size_t m_max_value;
    std::vector<char> m_buf;
    size_t m_pos = 0, m_end = 0;
    uint64_t m_consumed = 0;  // bytes dropped from the front of the buffer
};

// Decodes the JSON string whose text (without quotes) is `raw` into `out`; false on a bad escape.
bool unescape_json_string(std::string_view raw, std::string& out);

}  // namespace us::prof
