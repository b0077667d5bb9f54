// The one walk of a raw Kineto trace that both passes of a capture share (raw_trace.h reads it, rank_writer.h copies
// it): the outer object key by key and traceEvents event by event, each as the text of one JSON value, streamed
// through profiler/import's JsonStream so that no trace has to fit in memory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "profiler/import/json_stream.h"

namespace us::capture {

struct TraceWalker {
    std::function<void(const std::string& key, std::string_view value)> outer;  // every key but traceEvents
    std::function<void()> events_begin;                                         // at traceEvents' '['
    std::function<void(std::string_view event)> event;                          // each event's text
    std::function<void()> events_end;                                           // at its ']'
};

// The raw trace to walk: `bytes` when given (a file streamed from another node, named `path` in messages), else the
// file at `path`. Throws UserError when the file cannot be opened.
std::unique_ptr<prof::ByteSource> open_raw_trace(const std::string& path, const std::string* bytes);

// Walks the trace in `source` (plain or gzip JSON, an object with traceEvents or a bare list of events). Throws
// UserError naming the file and where it broke when it is not JSON, cut short or holds no traceEvents.
void walk_trace(prof::ByteSource& source, const TraceWalker& walker);

}  // namespace us::capture
