// The flat arena of plain data values (plain_data.h).
#include "profiler/plain/plain_data.h"

#include <fmt/core.h>

#include <bit>
#include <cstring>

#include "common/core/check.h"

namespace us::plain {

const char* plain_kind_name(PlainKind kind) {
    switch (kind) {
        case PlainKind::none:
            return "None";
        case PlainKind::boolean:
            return "a boolean";
        case PlainKind::integer:
            return "an integer";
        case PlainKind::floating:
            return "a float";
        case PlainKind::string:
            return "a string";
        case PlainKind::bytes:
            return "bytes";
        case PlainKind::list:
            return "a list";
        case PlainKind::tuple:
            return "a tuple";
        case PlainKind::dict:
            return "a dict";
        case PlainKind::set:
            return "a set";
    }
    return "?";
}

ValueId PlainData::push_value(const PlainValue& v) {
    US_CHECK_INPUT(values_.size() < size_t(UINT32_MAX) - 1, "more than 4 billion values: larger than Ultrascope reads");
    values_.push_back(v);
    return ValueId(values_.size() - 1);
}

ValueId PlainData::add_none() { return push_value({PlainKind::none, 0, 0}); }

ValueId PlainData::add_bool(bool b) { return push_value({PlainKind::boolean, 0, b ? 1u : 0u}); }

ValueId PlainData::add_int(int64_t i) { return push_value({PlainKind::integer, 0, uint64_t(i)}); }

ValueId PlainData::add_float(double d) { return push_value({PlainKind::floating, 0, std::bit_cast<uint64_t>(d)}); }

ValueId PlainData::add_text(PlainKind kind, std::string_view bytes) {
    US_ASSERT(kind == PlainKind::string || kind == PlainKind::bytes);
    US_CHECK_INPUT(bytes.size() < UINT32_MAX, "a string of {} bytes is longer than Ultrascope reads (4 GiB)",
                   bytes.size());
    const uint64_t offset = text_.size();
    text_.insert(text_.end(), bytes.begin(), bytes.end());
    return push_value({kind, uint32_t(bytes.size()), offset});
}

ValueId PlainData::add_container(PlainKind kind) {
    US_ASSERT(kind >= PlainKind::list);
    containers_.push_back({});
    return push_value({kind, uint32_t(containers_.size() - 1), 0});
}

bool PlainData::is_container(ValueId id) const { return id < values_.size() && values_[id].kind >= PlainKind::list; }

void PlainData::append(ValueId container, std::span<const ValueId> items) {
    US_ASSERT(is_container(container));
    if (items.empty()) return;
    US_CHECK_INPUT(staged_.size() + items.size() < UINT32_MAX / 2,
                   "more than 4 billion items: larger than Ultrascope reads");
    PlainContainer& c = containers_[values_[container].size];
    const uint32_t begin = uint32_t(staged_.size());
    staged_.insert(staged_.end(), items.begin(), items.end());
    // Consecutive appends to the same container (the usual case) grow its last chunk.
    if (c.last_chunk != UINT32_MAX && chunks_[c.last_chunk].begin + chunks_[c.last_chunk].count == begin) {
        chunks_[c.last_chunk].count += uint32_t(items.size());
    } else {
        chunks_.push_back({begin, uint32_t(items.size()), UINT32_MAX});
        const uint32_t id = uint32_t(chunks_.size() - 1);
        if (c.last_chunk == UINT32_MAX)
            c.first_chunk = id;
        else
            chunks_[c.last_chunk].next = id;
        c.last_chunk = id;
    }
    c.count += uint32_t(items.size());
}

void PlainData::finish() {
    // A container filled by one run of appends (nearly all) keeps its items where they were staged; only those
    // appended to in several runs are copied, contiguously, to the end.
    for (PlainContainer& c : containers_) {
        if (c.first_chunk == UINT32_MAX) continue;
        if (c.first_chunk == c.last_chunk) {
            c.begin = chunks_[c.first_chunk].begin;
            continue;
        }
        c.begin = uint32_t(staged_.size());
        for (uint32_t k = c.first_chunk; k != UINT32_MAX; k = chunks_[k].next)
            for (uint32_t i = 0; i < chunks_[k].count; ++i) {
                const ValueId v = staged_[chunks_[k].begin + i];
                staged_.push_back(v);
            }
    }
    items_ = std::move(staged_);
    staged_.clear();
    std::vector<Chunk>().swap(chunks_);
}

void PlainData::clear() {
    root = no_value;
    values_.clear();
    containers_.clear();
    chunks_.clear();
    staged_.clear();
    items_.clear();
    text_.clear();
}

void PlainData::reserve_for(size_t file_bytes) {
    values_.reserve(file_bytes / 16);
    staged_.reserve(file_bytes / 8);
}

size_t PlainData::memory_bytes() const {
    return values_.capacity() * sizeof(PlainValue) + containers_.capacity() * sizeof(PlainContainer) +
           chunks_.capacity() * sizeof(Chunk) + (staged_.capacity() + items_.capacity()) * sizeof(ValueId) +
           text_.capacity();
}

bool PlainData::get_int(ValueId id, int64_t& out) const {
    if (id >= values_.size()) return false;
    const PlainValue& v = values_[id];
    if (v.kind != PlainKind::integer && v.kind != PlainKind::boolean) return false;
    out = int64_t(v.payload);
    return true;
}

bool PlainData::get_number(ValueId id, double& out) const {
    if (id >= values_.size()) return false;
    const PlainValue& v = values_[id];
    if (v.kind == PlainKind::floating)
        out = std::bit_cast<double>(v.payload);
    else if (v.kind == PlainKind::integer)
        out = double(int64_t(v.payload));
    else
        return false;
    return true;
}

bool PlainData::get_string(ValueId id, std::string_view& out) const {
    if (id >= values_.size() || values_[id].kind != PlainKind::string) return false;
    out = std::string_view(text_.data() + values_[id].payload, values_[id].size);
    return true;
}

std::span<const ValueId> PlainData::items(ValueId container) const {
    if (!is_container(container)) return {};
    const PlainContainer& c = containers_[values_[container].size];
    return std::span<const ValueId>(items_.data() + c.begin, c.count);
}

ValueId PlainData::find(ValueId dict, std::string_view key) const {
    if (dict >= values_.size() || values_[dict].kind != PlainKind::dict) return no_value;
    const auto kv = items(dict);
    ValueId found = no_value;
    std::string_view k;
    for (size_t i = 0; i + 1 < kv.size(); i += 2)
        if (get_string(kv[i], k) && k == key) found = kv[i + 1];
    return found;
}

std::string PlainData::describe(ValueId id) const {
    if (id >= values_.size()) return "nothing";
    const PlainValue& v = values_[id];
    std::string_view s;
    int64_t i = 0;
    if (get_string(id, s)) return fmt::format("the string '{}'", s.substr(0, 40));
    if (v.kind == PlainKind::integer && get_int(id, i)) return fmt::format("the integer {}", i);
    if (v.kind == PlainKind::dict) return fmt::format("a dict of {} entries", items(id).size() / 2);
    if (is_container(id)) return fmt::format("{} of {} items", plain_kind_name(v.kind), items(id).size());
    return plain_kind_name(v.kind);
}

}  // namespace us::plain
