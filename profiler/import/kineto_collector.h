// What pass one of the Kineto reader keeps of a trace, whichever way its text was walked (kineto_parse.h: in
// pieces, or whole with simdjson): each parsed event becomes a span, a memory sample, an allocation or nothing, and
// the outer object's small values (distributedInfo, deviceProperties, versions) are kept as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/event.h"
#include "profiler/import/kineto_event.h"
#include "profiler/import/kineto_parse.h"

namespace us::prof {

class KinetoCollector {
public:
    explicit KinetoCollector(KinetoFile& file) : f(file) {}

    // One event of traceEvents, parsed (its views into the trace's text valid during the call).
    void add(const KinetoEvent& e);
    // A value of the outer object other than traceEvents; false, saying why in `error`, when one that is kept is not
    // valid JSON.
    bool outer(const std::string& key, std::string_view text, std::string& error);

private:
    uint32_t thread_of(const KinetoEvent& e);
    int16_t group_of(const KinetoEvent& e);
    int16_t group_seen(const KinetoEvent& e);  // group_of without the cache of the last group

    KinetoFile& f;
    bool collective_op(uint32_t name);  // is_collective_op_name of names[name], worked out once a name
    OpClass collective_named(const std::string& collective);

    std::unordered_map<uint64_t, uint32_t> thread_slots;  // (pid, tid) hashed -> index
    // What events repeat, worked out once: by name id (0 unknown, 1 no, 2 yes), by "Collective name" (a handful),
    // and the last process group's name as written (most collectives of a rank are in one or two groups).
    std::vector<uint8_t> collective_op_by_name;
    std::vector<std::pair<std::string, OpClass>> collective_by_text;
    std::string last_group_text;
    int16_t last_group = -1;
};

}  // namespace us::prof
