// Pass one of the Kineto reader (kineto_parse.h): the outer object key by key, traceEvents event by event, each
// event parsed in one pass into a reused KinetoEvent and kept as a 72-byte KinetoSpan (kineto_collector.h). A trace
// up to kWholeDocumentBytes of JSON is read whole and walked with simdjson (kineto_document.h); a larger one, or one
// that walk cannot read, in pieces.
#include "profiler/import/kineto_parse.h"

#include "common/core/check.h"
#include "profiler/import/json_stream.h"
#include "profiler/import/kineto_collector.h"
#include "profiler/import/kineto_document.h"
#include "profiler/import/kineto_event.h"

namespace us::prof {

std::string valid_utf8(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const uint8_t c = uint8_t(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        bool ok = n > 0 && i + n <= s.size();
        for (size_t k = 1; ok && k < n; ++k) ok = (uint8_t(s[i + k]) & 0xC0) == 0x80;
        if (ok)
            out.append(s, i, n), i += n;
        else
            out += '?', ++i;
    }
    return out;
}

uint32_t KinetoFile::intern(const std::string& s) {
    auto it = name_index.find(s);
    if (it != name_index.end()) return it->second;
    const uint32_t id = uint32_t(names.size());
    names.push_back(valid_utf8(s));  // names reach JSON (metadata, the report): bytes that are not UTF-8 become '?'
    name_index.emplace(s, id);
    return id;
}

namespace {

// The largest trace read whole: its JSON and simdjson's index of it (about as large again) are in memory while it is
// read, against a few MiB for the reader in pieces, which is slower (docs/performance.md).
constexpr size_t kWholeDocumentBytes = size_t(128) << 20;
// The buffer a thread keeps for the next file: a run's thousands of files reuse its pages rather than fault them in
// afresh; a larger one is let go once its file is read.
constexpr size_t kKeptDocumentBytes = size_t(32) << 20;

void read_events(JsonStream& in, KinetoCollector& sink, const KinetoFile& f) {
    KinetoEvent event;
    std::string error;
    in.expect('[', "to open the traceEvents list");
    if (in.accept(']')) return;
    for (;;) {
        const std::string_view text = in.value("an event of traceEvents");
        if (!parse_kineto_event(text, event, error))
            in.fail("event " + std::to_string(f.events + 1) + " of traceEvents: " + error);
        sink.add(event);
        if (in.accept(',')) continue;
        in.expect(']', "to close the traceEvents list (or ',' between events)");
        return;
    }
}

KinetoFile parse_in_pieces(ByteSource& source) {
    KinetoFile f;
    f.path = source.name();
    JsonStream in(source);
    KinetoCollector sink(f);
    bool saw_events = false;
    const char first = in.peek();
    if (first == '[') {  // a bare list of events (Chrome's array form)
        read_events(in, sink, f);
        saw_events = true;
    } else {
        in.expect('{',
                  "at the start of a Kineto trace (a JSON object with traceEvents; nor does it start like an "
                  "Ultrascope trace)");
        std::string key, error;
        if (!in.accept('}'))
            for (;;) {
                in.read_string(key, "(a key of the trace's outer object)");
                in.expect(':', "after a key");
                if (key == "traceEvents") {
                    read_events(in, sink, f);
                    saw_events = true;
                } else if (!sink.outer(key, in.value("a value of the trace's outer object"), error)) {
                    in.fail(error);
                }
                if (in.accept(',')) continue;
                in.expect('}', "to close the trace's outer object (or ',' between its keys)");
                break;
            }
    }
    if (!saw_events) in.fail("no traceEvents list: this is not a Kineto (torch.profiler) trace");
    f.json_bytes = source.bytes_out();
    return f;
}

}  // namespace

KinetoFile parse_kineto(ByteSource& source, KinetoWalk walk) {
    thread_local WholeBuffer document;
    struct LetGoOfLarge {
        ~LetGoOfLarge() {
            if (document.capacity() > kKeptDocumentBytes) document.release();
        }
    } let_go;
    const std::optional<size_t> size =
        walk == KinetoWalk::in_pieces ? std::nullopt
                                      : source.read_whole(document, kWholeDocumentBytes, kineto_document_padding());
    if (!size) return parse_in_pieces(source);
    {
        KinetoFile f;
        f.path = source.name();
        if (parse_kineto_document(std::string_view(document.data(), *size), document.capacity(), source, f)) {
            f.json_bytes = *size;
            source.walked(1.0);
            return f;
        }
    }
    // Damaged or unusual: the reader in pieces, over the bytes already read, says what is wrong (or reads it).
    source.walked(1.0);
    ByteSource again(std::string(document.data(), *size), source.name());
    again.watch(nullptr, source.cancel_flag());
    return parse_in_pieces(again);
}

KinetoFile parse_kineto_file(const std::string& path) {
    ByteSource source(path);
    return parse_kineto(source);
}

}  // namespace us::prof
