// The plain-data pickle writer (pickle_writer.h). Each container is EMPTY_x, MARK, its items, then APPENDS or
// SETITEMS; Python's unpickler and ours read that, however many items a MARK holds.
#include "profiler/plain/pickle_writer.h"

#include <bit>

namespace us::plain {
namespace {

void put_le(std::string& out, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

}  // namespace

PickleWriter::PickleWriter() { out_ = "\x80\x04"; }

void PickleWriter::begin_dict() { out_ += "}("; }
void PickleWriter::end_dict() { out_ += 'u'; }
void PickleWriter::begin_list() { out_ += "]("; }
void PickleWriter::end_list() { out_ += 'e'; }
void PickleWriter::begin_tuple() { out_ += '('; }
void PickleWriter::end_tuple() { out_ += 't'; }
void PickleWriter::none() { out_ += 'N'; }
void PickleWriter::boolean(bool b) { out_ += char(b ? 0x88 : 0x89); }

void PickleWriter::string(std::string_view s) {
    if (const auto it = strings_.find(std::string(s)); it != strings_.end()) return get(it->second);
    if (s.size() < 256) {
        out_ += char(0x8c);
        put_le(out_, s.size(), 1);
    } else if (s.size() <= UINT32_MAX) {
        out_ += 'X';
        put_le(out_, s.size(), 4);
    } else {
        out_ += char(0x8d);
        put_le(out_, s.size(), 8);
    }
    out_.append(s);
    strings_.emplace(std::string(s), memoize());
}

void PickleWriter::integer(int64_t v) {
    if (v >= 0 && v < 256) {
        out_ += 'K';
        put_le(out_, uint64_t(v), 1);
    } else if (v >= 0 && v < 65536) {
        out_ += 'M';
        put_le(out_, uint64_t(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        out_ += 'J';
        put_le(out_, uint64_t(uint32_t(int32_t(v))), 4);
    } else {
        // LONG1: little-endian two's complement, as few bytes as keep the sign
        int n = 8;
        while (n > 1) {
            const int64_t top = v >> (8 * (n - 1) - 1);  // the bits the top byte and the sign of the next hold
            if (top != 0 && top != -1) break;
            --n;
        }
        out_ += char(0x8a);
        put_le(out_, uint64_t(n), 1);
        put_le(out_, uint64_t(v), n);
    }
}

void PickleWriter::floating(double v) {
    out_ += 'G';
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    for (int i = 7; i >= 0; --i) out_.push_back(char((bits >> (8 * i)) & 0xff));
}

uint32_t PickleWriter::memoize() {
    out_ += char(0x94);
    return memo_count_++;
}

void PickleWriter::get(uint32_t key) {
    if (key < 256) {
        out_ += 'h';
        put_le(out_, key, 1);
    } else {
        out_ += 'j';
        put_le(out_, key, 4);
    }
}

std::string PickleWriter::finish() {
    out_ += '.';
    return std::move(out_);
}

}  // namespace us::plain
