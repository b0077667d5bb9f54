// Plain data (None, booleans, ints, floats, strings, bytes, lists, tuples, dicts, sets) read from an untrusted file,
// held flat: one arena of values, containers hold the indices of their items. A value shared through a pickle's
// memo is one value referenced twice, and a cycle is just an index that points back: nothing here recurses.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace us::plain {

enum class PlainKind : uint8_t { none, boolean, integer, floating, string, bytes, list, tuple, dict, set };
const char* plain_kind_name(PlainKind kind);

using ValueId = uint32_t;
inline constexpr ValueId no_value = UINT32_MAX;

struct PlainValue {
    PlainKind kind = PlainKind::none;
    uint32_t size = 0;     // string/bytes: length; container: its index in `containers`
    uint64_t payload = 0;  // integer (int64 bits), floating (double bits), boolean, string/bytes: offset in `text`
};

// A container's items, appended in chunks while parsing (a pickle may append to a list after it was nested),
// laid out contiguously by `finish()`: a dict's items are key, value, key, value ...
struct PlainContainer {
    uint32_t first_chunk = UINT32_MAX, last_chunk = UINT32_MAX;
    uint32_t begin = 0, count = 0;  // in `items`, after finish()
};

class PlainData {
public:
    ValueId root = no_value;

    ValueId add_none();
    ValueId add_bool(bool b);
    ValueId add_int(int64_t i);
    ValueId add_float(double d);
    ValueId add_text(PlainKind kind, std::string_view bytes);  // string or bytes
    ValueId add_container(PlainKind kind);
    // Appends items to a container (any order of calls while parsing).
    void append(ValueId container, std::span<const ValueId> items);
    // Lays every container's items out contiguously; call once when parsing is done.
    void finish();
    // Empties the arena and keeps its room, for the next file read on the same thread.
    void clear();
    // Reserves room for what a file of this size usually holds (a hint: the arena still grows as needed).
    void reserve_for(size_t file_bytes);

    const PlainValue& at(ValueId id) const { return values_[id]; }
    PlainKind kind(ValueId id) const { return values_[id].kind; }
    bool is_container(ValueId id) const;
    size_t value_count() const { return values_.size(); }
    size_t memory_bytes() const;

    // Typed reads: std::nullopt-free accessors that say whether the value had that type.
    bool get_int(ValueId id, int64_t& out) const;    // an integer or a boolean
    bool get_number(ValueId id, double& out) const;  // an integer or a float
    bool get_string(ValueId id, std::string_view& out) const;
    std::span<const ValueId> items(ValueId container) const;  // empty for a non-container
    // A dict's value for a string key (the last one, as Python keeps); no_value if absent or not a dict.
    ValueId find(ValueId dict, std::string_view key) const;
    // A short description for messages: "a list of 3 items", "the string 'alloc'" ...
    std::string describe(ValueId id) const;

private:
    ValueId push_value(const PlainValue& v);
    struct Chunk {
        uint32_t begin, count, next;
    };
    std::vector<PlainValue> values_;
    std::vector<PlainContainer> containers_;
    std::vector<Chunk> chunks_;
    std::vector<ValueId> staged_;  // items as appended (chunks point here)
    std::vector<ValueId> items_;   // items laid out per container (after finish)
    std::vector<char> text_;       // every string's and bytes' contents
};

}  // namespace us::plain
