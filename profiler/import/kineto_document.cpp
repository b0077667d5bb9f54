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

// The keys of args that are read; the others (shapes, strides, occupancy ...) are skipped.
enum class ArgKey {
    other,
    collective,
    dtype,
    pg_name,
    pg_desc,
    pg_ranks,
    name,  // strings and text
    external_id,
    correlation,
    stream,
    device,
    bytes,
    in_nelems,
    out_nelems,
    group_size,
    src_rank,
    dst_rank,
    mem_device,
    mem_device_type,  // integers
    input_dims,
    input_types,
    concrete_inputs,  // kept as text
    total_allocated,
    total_reserved  // numbers
};

// By length first: one or two comparisons a key rather than one for every key that is read.
ArgKey arg_key(std::string_view k) {
    switch (k.size()) {
        case 4:
            return k == "name" ? ArgKey::name : ArgKey::other;
        case 5:
            return k == "bytes" ? ArgKey::bytes : k == "dtype" ? ArgKey::dtype : ArgKey::other;
        case 6:
            return k == "stream" ? ArgKey::stream : k == "device" ? ArgKey::device : ArgKey::other;
        case 8:
            return k == "Src Rank" ? ArgKey::src_rank : k == "Dst Rank" ? ArgKey::dst_rank : ArgKey::other;
        case 9:
            return k == "Device Id" ? ArgKey::mem_device : ArgKey::other;
        case 10:
            return k == "Input Dims"   ? ArgKey::input_dims
                   : k == "Input type" ? ArgKey::input_types
                   : k == "Group size" ? ArgKey::group_size
                                       : ArgKey::other;
        case 11:
            return k == "External id"   ? ArgKey::external_id
                   : k == "correlation" ? ArgKey::correlation
                   : k == "Device Type" ? ArgKey::mem_device_type
                                        : ArgKey::other;
        case 13:
            return k == "In msg nelems" ? ArgKey::in_nelems : ArgKey::other;
        case 14:
            return k == "Out msg nelems"   ? ArgKey::out_nelems
                   : k == "Total Reserved" ? ArgKey::total_reserved
                                           : ArgKey::other;
        case 15:
            return k == "Collective name"   ? ArgKey::collective
                   : k == "Concrete Inputs" ? ArgKey::concrete_inputs
                   : k == "Total Allocated" ? ArgKey::total_allocated
                                            : ArgKey::other;
        case 18:
            return k == "Process Group Name" ? ArgKey::pg_name : ArgKey::other;
        case 19:
            return k == "Process Group Ranks" ? ArgKey::pg_ranks : ArgKey::other;
        case 25:
            return k == "Process Group Description" ? ArgKey::pg_desc : ArgKey::other;
        default:
            return ArgKey::other;
    }
}

int64_t* integer_arg(ArgKey key, KinetoEvent& e) {
    switch (key) {
        case ArgKey::external_id:
            return &e.external_id;
        case ArgKey::correlation:
            return &e.correlation;
        case ArgKey::stream:
            return &e.stream;
        case ArgKey::device:
            return &e.device;
        case ArgKey::bytes:
            return &e.bytes;
        case ArgKey::in_nelems:
            return &e.in_nelems;
        case ArgKey::out_nelems:
            return &e.out_nelems;
        case ArgKey::group_size:
            return &e.group_size;
        case ArgKey::src_rank:
            return &e.src_rank;
        case ArgKey::dst_rank:
            return &e.dst_rank;
        case ArgKey::mem_device:
            return &e.mem_device;
        case ArgKey::mem_device_type:
            return &e.mem_device_type;
        default:
            return nullptr;
    }
}

bool read_args(od::object args, KinetoEvent& e) {
    for (auto member : args) {
        od::field field;
        if (std::move(member).get(field)) return false;
        const ArgKey key = arg_key(raw_key(field.key()));
        if (key == ArgKey::other) continue;
        od::value v = field.value();
        std::string_view text;
        switch (key) {
            case ArgKey::collective:
                if (!string_value(v, e.collective)) return false;
                continue;
            case ArgKey::dtype:
                if (!string_value(v, e.dtype)) return false;
                continue;
            case ArgKey::pg_name:
                if (!string_value(v, e.pg_name)) return false;
                continue;
            case ArgKey::pg_desc:
                if (!string_value(v, e.pg_desc)) return false;
                continue;
            case ArgKey::name:  // metadata events: process_name, thread_name
                if (is_string(v) && !string_value(v, e.args_name)) return false;
                continue;
            default:
                break;
        }
        if (!outer_value_text(v, text)) return false;
        if (int64_t* integer = integer_arg(key, e))
            integer_from_text(text, *integer);
        else if (key == ArgKey::pg_ranks)
            e.pg_ranks.assign(text);
        else if (key == ArgKey::input_dims)
            e.input_dims = text;
        else if (key == ArgKey::input_types)
            e.input_types = text;
        else if (key == ArgKey::concrete_inputs)
            e.concrete_inputs = text;
        else if (key == ArgKey::total_allocated)
            e.total_allocated = number_from_text(text);
        else if (key == ArgKey::total_reserved)
            e.total_reserved = number_from_text(text);
    }
    return true;
}

// The keys of an event that are read; the others ("s", "id", "bp" ...) are skipped.
enum class EventKey { other, ph, name, cat, pid, tid, ts, dur, args };

EventKey event_key(std::string_view k) {
    switch (k.size()) {
        case 2:
            return k == "ph" ? EventKey::ph : k == "ts" ? EventKey::ts : EventKey::other;
        case 3:
            return k == "pid"   ? EventKey::pid
                   : k == "tid" ? EventKey::tid
                   : k == "cat" ? EventKey::cat
                   : k == "dur" ? EventKey::dur
                                : EventKey::other;
        case 4:
            return k == "name" ? EventKey::name : k == "args" ? EventKey::args : EventKey::other;
        default:
            return EventKey::other;
    }
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
        std::string_view text;
        if (KinetoCollector::reads_text(event)) {  // walked again, for the few events that need their text
            object.reset();
            if (object.raw_json().get(text)) return false;
        }
        sink.add(event, text);
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
