// The forward-only JSON reader (json_stream.h). Values are delimited by one scan that follows strings and nesting;
// the caller parses the delimited text.
#include "profiler/import/json_stream.h"

#include <cstring>

#include "common/core/check.h"

namespace us::prof {

namespace {
std::string size_text(size_t bytes) {
    return bytes >= (size_t(1) << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}
}  // namespace

JsonStream::JsonStream(ByteSource& source, size_t max_value_bytes)
    : m_source(source), m_max_value(max_value_bytes), m_buf(std::min(size_t(1) << 20, max_value_bytes + 1)) {}

void JsonStream::fail(const std::string& what) const {
    fail_user("'{}' is not a readable Kineto trace: {} (at byte {} of {} bytes of JSON read)", m_source.name(), what,
              offset(), m_source.bytes_out());
}

bool JsonStream::fill() {
    if (m_pos > 0) {  // drop what was consumed
        std::memmove(m_buf.data(), m_buf.data() + m_pos, m_end - m_pos);
        m_consumed += m_pos;
        m_end -= m_pos;
        m_pos = 0;
    }
    if (m_end == m_buf.size()) {
        if (m_buf.size() >= m_max_value + 1) fail("a single value longer than " + size_text(m_max_value));
        m_buf.resize(std::min(m_buf.size() * 2, m_max_value + 1));
    }
    const size_t n = m_source.read(m_buf.data() + m_end, m_buf.size() - m_end);
    m_end += n;
    return n > 0;
}

void JsonStream::skip_blanks() {
    for (;;) {
        while (m_pos < m_end) {
            const char c = m_buf[m_pos];
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
            ++m_pos;
        }
        if (!fill()) return;
    }
}

char JsonStream::peek() {
    skip_blanks();
    return m_pos < m_end ? m_buf[m_pos] : 0;
}

bool JsonStream::accept(char c) {
    if (peek() != c) return false;
    ++m_pos;
    return true;
}

namespace {
std::string describe(char c) {
    if (c == 0) return "the end of the file";
    if (c >= 32 && c < 127) return std::string("'") + c + "'";
    return "byte " + std::to_string(int(uint8_t(c)));
}
}  // namespace

void JsonStream::expect(char c, const char* context) {
    const char got = peek();
    if (got != c) fail(std::string("expected '") + c + "' " + context + ", found " + describe(got));
    ++m_pos;
}

namespace {
// The closing quote of a string whose text starts at or before `p`: the first '"' not escaped by an odd run of
// backslashes (counted back to `floor`); nullptr when [p, end) holds none.
const char* closing_quote(const char* p, const char* end, const char* floor) {
    for (;;) {
        const char* q = static_cast<const char*>(std::memchr(p, '"', size_t(end - p)));
        if (!q) return nullptr;
        size_t backslashes = 0;
        for (const char* r = q; r > floor && r[-1] == '\\'; --r) ++backslashes;
        if (backslashes % 2 == 0) return q;
        p = q + 1;
    }
}
}  // namespace

std::string_view JsonStream::value(const char* context) {
    const char first = peek();
    if (first == 0) fail(std::string("the file ends where ") + context + " should be");
    // Scan from m_pos; `i` is relative to the value's start so that refills (which move the buffer) keep it.
    // Inside strings memchr finds the next quote: the text of names is most of a trace's bytes.
    size_t i = 0;
    int depth = 0;
    bool in_string = false;
    const bool scalar = first != '{' && first != '[' && first != '"';
    for (;;) {
        const char* start = m_buf.data() + m_pos;
        const char* end = m_buf.data() + m_end;
        const char* p = start + i;
        while (p < end) {
            if (in_string) {
                const char* q = closing_quote(p, end, start);
                if (!q) {
                    p = end;
                    break;
                }
                p = q + 1;
                in_string = false;
                if (depth == 0) {
                    i = size_t(p - start);
                    goto done;
                }
                continue;
            }
            const char c = *p++;
            if (scalar) {
                if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
                    i = size_t(p - 1 - start);
                    goto done;
                }
                continue;
            }
            if (c == '"')
                in_string = true;
            else if (c == '{' || c == '[')
                ++depth;
            else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    i = size_t(p - start);
                    goto done;
                }
                if (depth < 0) fail(std::string("unbalanced '") + c + "' in " + context);
            }
        }
        i = size_t(p - start);
        if (i > m_max_value) fail(std::string(context) + " longer than " + size_text(m_max_value));
        if (!fill()) {
            if (scalar && i > 0) goto done;
            fail(std::string("the file ends inside ") + context);
        }
    }
done:
    std::string_view v(m_buf.data() + m_pos, i);
    m_pos += i;
    return v;
}

void JsonStream::read_string(std::string& out, const char* context) {
    if (peek() != '"') fail(std::string("expected a string ") + context + ", found " + describe(peek()));
    const std::string_view v = value(context);
    if (!unescape_json_string(v.substr(1, v.size() - 2), out)) fail(std::string("a bad escape in ") + context);
}

namespace {
void put_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80)
        out += char(cp);
    else if (cp < 0x800)
        out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
        out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
    else
        out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F)), out += char(0x80 | ((cp >> 6) & 0x3F)),
            out += char(0x80 | (cp & 0x3F));
}
bool hex4(std::string_view s, size_t at, uint32_t& v) {
    if (at + 4 > s.size()) return false;
    v = 0;
    for (size_t k = at; k < at + 4; ++k) {
        const char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= uint32_t(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= uint32_t(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= uint32_t(c - 'A' + 10);
        else
            return false;
    }
    return true;
}
}  // namespace

bool unescape_json_string(std::string_view raw, std::string& out) {
    out.clear();
    if (raw.find('\\') == std::string_view::npos) {
        out.assign(raw);
        return true;
    }
    for (size_t i = 0; i < raw.size(); ++i) {
        const char c = raw[i];
        if (c != '\\') {
            out += c;
            continue;
        }
        if (++i >= raw.size()) return false;
        switch (raw[i]) {
            case '"':
                out += '"';
                break;
            case '\\':
                out += '\\';
                break;
            case '/':
                out += '/';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'n':
                out += '\n';
                break;
            case 'r':
                out += '\r';
                break;
            case 't':
                out += '\t';
                break;
            case 'u': {
                uint32_t cp = 0;
                if (!hex4(raw, i + 1, cp)) return false;
                i += 4;
                uint32_t low = 0;
                if (cp >= 0xD800 && cp < 0xDC00 && i + 2 < raw.size() && raw[i + 1] == '\\' && raw[i + 2] == 'u' &&
                    hex4(raw, i + 3, low) && low >= 0xDC00 && low < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    i += 6;
                }
                put_utf8(cp, out);
                break;
            }
            default:
                return false;
        }
    }
    return true;
}

}  // namespace us::prof
