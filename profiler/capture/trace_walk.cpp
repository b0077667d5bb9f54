// The shared walk of a raw Kineto trace (trace_walk.h): the same checks as the Kineto reader's pass in pieces
// (profiler/import/kineto_parse.cpp), with the values handed to the caller rather than collected.
#include "profiler/capture/trace_walk.h"

namespace us::capture {

namespace {

void walk_events(prof::JsonStream& in, const TraceWalker& w) {
    in.expect('[', "to open the traceEvents list");
    if (w.events_begin) w.events_begin();
    if (!in.accept(']'))
        for (;;) {
            const std::string_view text = in.value("an event of traceEvents");
            if (text.empty() || text.front() != '{') in.fail("an event of traceEvents is not a JSON object");
            if (w.event) w.event(text);
            if (in.accept(',')) continue;
            in.expect(']', "to close the traceEvents list (or ',' between events)");
            break;
        }
    if (w.events_end) w.events_end();
}

}  // namespace

std::unique_ptr<prof::ByteSource> open_raw_trace(const std::string& path, const std::string* bytes) {
    if (bytes) return std::make_unique<prof::ByteSource>(*bytes, path);
    return std::make_unique<prof::ByteSource>(path);
}

void walk_trace(prof::ByteSource& source, const TraceWalker& walker) {
    prof::JsonStream in(source);
    if (in.peek() == '[') {  // Chrome's bare list of events
        walk_events(in, walker);
    } else {
        in.expect('{', "at the start of a Kineto trace (a JSON object with traceEvents)");
        bool saw_events = false;
        std::string key;
        if (!in.accept('}'))
            for (;;) {
                in.read_string(key, "(a key of the trace's outer object)");
                in.expect(':', "after a key");
                if (key == "traceEvents") {
                    walk_events(in, walker);
                    saw_events = true;
                } else {
                    const std::string_view text = in.value("a value of the trace's outer object");
                    if (walker.outer) walker.outer(key, text);
                }
                if (in.accept(',')) continue;
                in.expect('}', "to close the trace's outer object (or ',' between its keys)");
                break;
            }
        if (!saw_events) in.fail("no traceEvents list: this is not a Kineto (torch.profiler) trace");
    }
    if (in.peek() != 0) in.fail("text after the end of the trace");
}

}  // namespace us::capture
