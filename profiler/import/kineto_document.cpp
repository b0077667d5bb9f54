// The whole-document walk of a Kineto trace (kineto_document.h): simdjson walks the outer object, each event and its
// args; each field's text is read by the functions the reader in pieces uses (kineto_event.h), so that both walks
// keep exactly the same fields (a test compares them on every committed trace).
#include "profiler/import/kineto_document.h"

#include <simdjson.h>

#include <algorithm>
#include <string>
#include <utility>

#include "profiler/import/kineto_collector.h"
#include "profiler/import/json_stream.h"
#include "profiler/import/kineto_event.h"
#include "profiler/import/kineto_keys.h"

namespace us::prof {

namespace od = simdjson::ondemand;

size_t kineto_document_padding() { return simdjson::SIMDJSON_PADDING; }

namespace {

std::string_view trim_right(std::string_view s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

// The text of an outer value that is not traceEvents: objects and lists whole, scalars as their token.
bool outer_value_text(od::value value, std::string_view& text) {
    od::json_type type;
    if (value.type().get(type)) return false;
    if (type == od::json_type::object) {
        od::object o;
        return !value.get_object().get(o) && !o.raw_json().get(text);
    }
    if (type == od::json_type::array) {
        od::array a;
        return !value.get_array().get(a) && !a.raw_json().get(text);
    }
    text = trim_right(value.raw_json_token());
    return true;
}

// A field's key as written, escapes kept (the reader in pieces compares keys so too).
std::string_view raw_key(const od::raw_json_string& key) {
    const char* start = key.raw();
    const char* p = start;
    for (;; ++p) {
        while (*p != '"') ++p;
        const char* q = p;
        while (q > start && q[-1] == '\\') --q;
        if ((p - q) % 2 == 0) break;
    }
    return {start, size_t(p - start)};
}

// A string field's value unescaped; false (the event is refused) when it is not a string.
bool string_value(od::value value, std::string& out) {
    const std::string_view t = trim_right(value.raw_json_token());
    if (t.size() < 2 || t.front() != '"' || t.back() != '"') return false;
    return unescape_json_string(t.substr(1, t.size() - 2), out);
}

bool is_string(od::value value) {
    const std::string_view t = value.raw_json_token();
    return !t.empty() && t.front() == '"';
}

bool read_args(od::object args, KinetoEvent& e) {
    for (auto member : args) {
        od::field field;
        if (std::move(member).get(field)) return false;
        const ArgKey key = arg_key(raw_key(field.key()));
        if (key == ArgKey::other) continue;
        od::value v = field.value();
        std::string_view text;
        if (std::string* string = string_arg(key, e)) {
            if (!string_value(v, *string)) return false;
            continue;
        }
        if (key == ArgKey::name) {  // metadata events: process_name, thread_name
            if (is_string(v) && !string_value(v, e.args_name)) return false;
            continue;
        }
        if (!outer_value_text(v, text)) return false;
        read_arg_text(key, text, e);
    }
    return true;
}

// One event, field by field, into `e` (cleared first); false when the reader in pieces would refuse it.
bool read_event(od::object object, KinetoEvent& e) {
    e.clear();
    for (auto member : object) {
        od::field field;
        if (std::move(member).get(field)) return false;
        const EventKey key = event_key(raw_key(field.key()));
        if (key == EventKey::other) continue;
        std::string_view text;
        od::value v = field.value();
        switch (key) {
            case EventKey::ph: {
                const std::string_view t = trim_right(v.raw_json_token());
                if (t.size() < 2 || t.front() != '"') return false;
                e.ph = t[1] == '"' ? 0 : t[1];
                break;
            }
            case EventKey::name:
                if (!string_value(v, e.name)) return false;
                break;
            case EventKey::cat:
                if (!string_value(v, e.cat)) return false;
                break;
            case EventKey::pid:
            case EventKey::tid: {
                int64_t& id = key == EventKey::pid ? e.pid : e.tid;
                if (!outer_value_text(v, text)) return false;
                if (!text.empty() && text.front() == '"') {  // a string id ("Spans", "stream 7 7"): its raw text hashed
                    if (text.size() < 2 || text.back() != '"') return false;
                    id = text_id(text.substr(1, text.size() - 2));
                    (key == EventKey::pid ? e.pid_text : e.tid_text) = true;
                } else {
                    integer_from_text(text, id);
                }
                break;
            }
            case EventKey::ts:
            case EventKey::dur: {
                if (!outer_value_text(v, text)) return false;
                if (!text.empty() && text.front() == '"') text = text.substr(1, text.size() - 2);
                int64_t ns = 0;
                if (!parse_us_as_ns(text, ns)) return false;
                (key == EventKey::ts ? e.ts_ns : e.dur_ns) = ns;
                (key == EventKey::ts ? e.has_ts : e.has_dur) = true;
                break;
            }
            case EventKey::args: {
                od::json_type type;
                if (v.type().get(type)) return false;
                if (type != od::json_type::object) break;
                od::object args;
                if (v.get_object().get(args) || !read_args(args, e)) return false;
                break;
            }
            case EventKey::other:
                break;
        }
    }
    return true;
}

bool walk_events(od::array events, od::document& doc, std::string_view json, ByteSource& source, KinetoFile& f,
                 KinetoCollector& sink) {
    KinetoEvent event;
    for (auto element : events) {
        od::object object;
        if (element.get_object().get(object) || !read_event(object, event)) return false;
        sink.add(event);
        if ((f.events & 4095) == 0) {
            const char* at = nullptr;
            if (!doc.current_location().get(at) && at >= json.data() && at <= json.data() + json.size())
                source.walked(double(at - json.data()) / double(std::max<size_t>(json.size(), 1)));
            else
                source.check_cancel();
        }
    }
    return true;
}

}  // namespace

bool parse_kineto_document(std::string_view json, size_t padded_size, ByteSource& source, KinetoFile& f) {
    // Kept by the thread for its next file (its index is reused, not faulted in again), unless it grew large.
    thread_local od::parser parser;
    struct LetGoOfLarge {
        ~LetGoOfLarge() {
            if (parser.capacity() > (size_t(32) << 20)) parser = od::parser();
        }
    } let_go;
    od::document doc;
    if (parser.iterate(json.data(), json.size(), padded_size).get(doc)) return false;
    KinetoCollector sink(f);
    od::json_type type;
    if (doc.type().get(type)) return false;
    if (type == od::json_type::array) {  // a bare list of events (Chrome's array form)
        od::array events;
        return !doc.get_array().get(events) && walk_events(events, doc, json, source, f, sink);
    }
    od::object outer;
    if (doc.get_object().get(outer)) return false;
    bool saw_events = false;
    std::string key, error;
    for (auto field : outer) {
        std::string_view k;
        if (field.unescaped_key().get(k)) return false;
        key.assign(k);
        od::value value;
        if (field.value().get(value)) return false;
        if (key == "traceEvents") {
            od::array events;
            if (value.get_array().get(events) || !walk_events(events, doc, json, source, f, sink)) return false;
            saw_events = true;
            continue;
        }
        std::string_view text;
        if (!outer_value_text(value, text) || !sink.outer(key, text, error)) return false;
    }
    return saw_events;
}

}  // namespace us::prof
