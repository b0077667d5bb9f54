// A pickle writer of plain data (protocol 4: what torch's _dump_snapshot writes): dicts, lists, tuples, strings,
// ints, floats, None and booleans, streamed as opcodes; repeated strings and shared values go through the memo.
// Used to export Ultrascope's allocations as a memory snapshot pytorch.org/memory_viz opens, and by the benchmark.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace us::plain {

class PickleWriter {
public:
    PickleWriter();
    // Containers: open, write their items (a dict: key, value, key, value ...), close.
    void begin_dict();
    void end_dict();
    void begin_list();
    void end_list();
    void begin_tuple();  // closed by end_tuple (MARK ... TUPLE)
    void end_tuple();
    void string(std::string_view s);  // memoized: a string written twice is written once
    void integer(int64_t v);
    void floating(double v);
    void none();
    void boolean(bool b);
    // Memoizes the value just written and returns its key; `get` writes that value again (shared, not copied).
    uint32_t memoize();
    void get(uint32_t key);
    // The pickle (STOP appended); the writer is done.
    std::string finish();

private:
    std::string out_;
    uint32_t memo_count_ = 0;
    std::unordered_map<std::string, uint32_t> strings_;
};

}  // namespace us::plain
