// The parser of one Kineto event (kineto_event.h): a hand-written single pass over the object's text that keeps
// the keys the mapping reads and skips the rest (shapes, strides, occupancy ...).
#include "profiler/import/kineto_event.h"
#include "profiler/import/kineto_keys.h"

#include <charconv>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "profiler/import/json_stream.h"

namespace us::prof {

void KinetoEvent::clear() {
    ph = 0;
    name.clear(), cat.clear();
    pid = tid = 0;
    pid_text = tid_text = false;
    has_ts = has_dur = false;
    ts_ns = dur_ns = 0;
    external_id = correlation = stream = device = bytes = -1;
    in_nelems = out_nelems = group_size = src_rank = dst_rank = -1;
    collective.clear(), dtype.clear(), pg_name.clear(), pg_desc.clear(), pg_ranks.clear(), args_name.clear();
    total_allocated = total_reserved = -1;
    mem_device = INT64_MIN;
    mem_device_type = -1;
    input_dims = input_types = concrete_inputs = memory_bytes = memory_addr = stream_text = {};
}

bool parse_us_as_ns(std::string_view s, int64_t& ns) {
    size_t i = 0;
    bool negative = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) negative = s[i++] == '-';
    int64_t whole = 0;
    size_t digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
        if (whole > (INT64_MAX / 1000 - 9) / 10) return false;  // past ~292 years of microseconds
        whole = whole * 10 + (s[i] - '0');
    }
    int64_t frac = 0;  // nanoseconds from the fraction
    if (i < s.size() && s[i] == '.') {
        ++i;
        int scale = 100;
        bool round_up = false;
        for (size_t k = 0; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++k, ++digits) {
            if (k < 3)
                frac += (s[i] - '0') * scale, scale /= 10;
            else if (k == 3)
                round_up = s[i] >= '5';
        }
        frac += round_up;
    }
    if (digits == 0) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {  // rare: let strtod take it
        const std::string copy(s);
        char* end = nullptr;
        const double v = std::strtod(copy.c_str(), &end);
        if (end != copy.c_str() + copy.size() || !std::isfinite(v) || std::fabs(v) > 9e15) return false;
        ns = std::llround(v * 1000.0);
        return true;
    }
    if (i != s.size()) return false;
    ns = whole * 1000 + frac;
    if (negative) ns = -ns;
    return true;
}

void integer_from_text(std::string_view v, int64_t& out) {
    if (!v.empty() && v[0] == '"') {  // ids written as strings ("stream 7", "12")
        v = v.substr(1, v.size() - 2);
        const size_t d = v.find_first_of("0123456789-");
        if (d == std::string_view::npos) return;  // no number in it: keep the default
        v = v.substr(d);
    }
    const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
    if (r.ec == std::errc()) return;
    double d = 0;
    const auto rd = std::from_chars(v.data(), v.data() + v.size(), d);
    if (rd.ec != std::errc() || !std::isfinite(d) || std::fabs(d) > 9.2e18) return;  // null, true ...: ignore
    out = int64_t(d);
}

double number_from_text(std::string_view v) {
    double out = -1;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
    return r.ec == std::errc() ? out : -1;
}

int64_t text_id(std::string_view raw) {
    return int64_t(std::hash<std::string_view>{}(raw)&0x3fffffffffffffffULL) | (int64_t(1) << 62);
}

namespace {

// A cursor over one event's text.
struct Cursor {
    std::string_view s;
    size_t i = 0;
    std::string* error;

    bool fail(const char* what) {
        if (error->empty()) *error = what;
        return false;
    }
    void blanks() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
    }
    bool eat(char c) {
        blanks();
        if (i < s.size() && s[i] == c) return ++i, true;
        return false;
    }
    // The raw text of a string (between its quotes).
    bool raw_string(std::string_view& out) {
        blanks();
        if (i >= s.size() || s[i] != '"') return fail("expected a string");
        const size_t start = ++i;
        for (;;) {
            const char* q = static_cast<const char*>(std::memchr(s.data() + i, '"', s.size() - i));
            if (!q) return fail("a string that does not end");
            i = size_t(q - s.data());
            size_t backslashes = 0;
            for (size_t k = i; k > start && s[k - 1] == '\\'; --k) ++backslashes;
            if (backslashes % 2 == 0) break;
            ++i;
        }
        out = s.substr(start, i - start);
        ++i;
        return true;
    }
    bool string(std::string& out) {
        std::string_view raw;
        if (!raw_string(raw)) return false;
        if (!unescape_json_string(raw, out)) return fail("a bad escape in a string");
        return true;
    }
    // The text of any value (for skipping, and for numbers).
    bool any(std::string_view& out) {
        blanks();
        if (i >= s.size()) return fail("a value is missing");
        const size_t start = i;
        const char c = s[i];
        if (c == '"') {
            std::string_view raw;
            if (!raw_string(raw)) return false;
        } else if (c == '{' || c == '[') {
            int depth = 0;
            for (; i < s.size(); ++i) {
                const char d = s[i];
                if (d == '"') {
                    std::string_view skipped;
                    if (!raw_string(skipped)) return false;
                    --i;  // the loop's ++i steps past the closing quote
                } else if (d == '{' || d == '[')
                    ++depth;
                else if (d == '}' || d == ']') {
                    if (--depth == 0) break;
                }
            }
            if (i >= s.size()) return fail("an unbalanced object or list");
            ++i;
        } else {
            while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n') ++i;
            if (i == start) return fail("a value is missing");
        }
        out = s.substr(start, i - start);
        return true;
    }
    bool integer(int64_t& out) {
        std::string_view v;
        if (!any(v)) return false;
        integer_from_text(v, out);
        return true;
    }
    // An object's members: `member(key)` consumes the value.
    template <class F>
    bool object(F&& member) {
        if (!eat('{')) return fail("expected an object");
        if (eat('}')) return true;
        std::string_view key;
        do {
            if (!raw_string(key)) return false;
            if (!eat(':')) return fail("expected ':' after a key");
            if (!member(key)) return false;
        } while (eat(','));
        if (!eat('}')) return fail("expected ',' or '}' in an object");
        return true;
    }
};

// pid/tid: a number, or a string ("Spans", "stream 7 7") kept as a hash.
bool id_field(Cursor& c, int64_t& out, bool& text) {
    c.blanks();
    if (c.i < c.s.size() && c.s[c.i] == '"') {
        std::string_view raw;
        if (!c.raw_string(raw)) return false;
        out = text_id(raw);
        text = true;
        return true;
    }
    return c.integer(out);
}

}  // namespace

bool parse_kineto_event(std::string_view text, KinetoEvent& e, std::string& error) {
    e.clear();
    error.clear();
    Cursor c{text, 0, &error};
    std::string_view v;
    auto args_member = [&](std::string_view k) -> bool {
        const ArgKey key = arg_key(k);
        if (std::string* string = string_arg(key, e)) return c.string(*string);
        if (key == ArgKey::name) {  // metadata events: process_name, thread_name
            c.blanks();
            if (c.i < c.s.size() && c.s[c.i] == '"') return c.string(e.args_name);
        }
        if (!c.any(v)) return false;
        if (key != ArgKey::other && key != ArgKey::name) read_arg_text(key, v, e);
        return true;
    };
    const bool ok = c.object([&](std::string_view k) -> bool {
        const EventKey key = event_key(k);
        switch (key) {
            case EventKey::ph: {
                std::string_view raw;
                if (!c.raw_string(raw)) return false;
                e.ph = raw.empty() ? 0 : raw[0];
                return true;
            }
            case EventKey::name:
                return c.string(e.name);
            case EventKey::cat:
                return c.string(e.cat);
            case EventKey::pid:
                return id_field(c, e.pid, e.pid_text);
            case EventKey::tid:
                return id_field(c, e.tid, e.tid_text);
            case EventKey::ts:
            case EventKey::dur: {
                if (!c.any(v)) return false;
                if (!v.empty() && v[0] == '"') v = v.substr(1, v.size() - 2);
                int64_t ns = 0;
                const bool ts = key == EventKey::ts;
                if (!parse_us_as_ns(v, ns))
                    return c.fail(ts ? "'ts' is not a number of microseconds"
                                     : "'dur' is not a number of microseconds");
                (ts ? e.ts_ns : e.dur_ns) = ns;
                (ts ? e.has_ts : e.has_dur) = true;
                return true;
            }
            case EventKey::args:
                c.blanks();
                if (c.i < c.s.size() && c.s[c.i] == '{') return c.object(args_member);
                return c.any(v);
            case EventKey::other:
                return c.any(v);
        }
        return c.any(v);
    });
    if (!ok) return false;
    c.blanks();
    if (c.i != text.size()) return c.fail("text after the event's closing '}'");
    return true;
}

}  // namespace us::prof
