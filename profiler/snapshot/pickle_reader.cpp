// The plain-data pickle machine (pickle_reader.h): a loop over opcodes with an explicit value stack and mark stack.
// Opcodes that name a class, call something or look up a persistent id are refused before anything else happens.
#include "profiler/snapshot/pickle_reader.h"

#include <fmt/core.h>

#include <bit>
#include <cstring>
#include <unordered_map>

#include "common/core/check.h"

namespace us::snap {
namespace {

// The opcodes that build objects from classes or calls: refused, by name.
const char* refused_opcode_name(uint8_t op) {
    switch (op) {
        case 'c':
            return "GLOBAL";
        case 0x93:
            return "STACK_GLOBAL";
        case 'R':
            return "REDUCE";
        case 'b':
            return "BUILD";
        case 0x81:
            return "NEWOBJ";
        case 0x92:
            return "NEWOBJ_EX";
        case 'i':
            return "INST";
        case 'o':
            return "OBJ";
        case 'P':
            return "PERSID";
        case 'Q':
            return "BINPERSID";
        case 0x82:
            return "EXT1";
        case 0x83:
            return "EXT2";
        case 0x84:
            return "EXT4";
        case 0x97:
            return "NEXT_BUFFER";
        case 0x98:
            return "READONLY_BUFFER";
        default:
            return nullptr;
    }
}

// Protocol 0 and 1's text opcodes: plain data, but never written by protocols 2 to 5.
const char* text_opcode_name(uint8_t op) {
    switch (op) {
        case 'I':
            return "INT";
        case 'L':
            return "LONG";
        case 'F':
            return "FLOAT";
        case 'S':
            return "STRING";
        case 'V':
            return "UNICODE";
        case 'p':
            return "PUT";
        case 'g':
            return "GET";
        default:
            return nullptr;
    }
}

class PickleMachine {
public:
    PickleMachine(std::string_view bytes, const std::string& source, const PickleLimits& limits)
        : bytes_(bytes), source_(source), limits_(limits) {
        data_.reserve_for(bytes.size());
    }

    PlainData run() {
        while (true) {
            if (pos_ >= bytes_.size())
                fail("the pickle ends without its STOP opcode (a truncated file?): {} bytes read", bytes_.size());
            op_at_ = pos_;
            const uint8_t op = uint8_t(bytes_[pos_++]);
            if (op == '.') break;
            step(op);
        }
        US_CHECK_INPUT(marks_.empty() && !stack_.empty(), "{}: offset {}: STOP with {} on the stack", source_, op_at_,
                       stack_.empty() ? "nothing" : "an unclosed MARK");
        data_.root = stack_.back();
        data_.finish();
        return std::move(data_);
    }

private:
    std::string_view bytes_;
    const std::string& source_;
    PickleLimits limits_;
    size_t pos_ = 0, op_at_ = 0;
    PlainData data_;
    std::vector<ValueId> stack_;
    std::vector<size_t> marks_;  // stack sizes at each MARK
    std::vector<ValueId> memo_;
    std::unordered_map<uint64_t, ValueId> sparse_memo_;  // keys past the dense range (never written by Python)

    template <typename... Args>
    [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
        fail_user("{}: offset {}: {}", source_, op_at_, fmt::format(format, std::forward<Args>(args)...));
    }

    std::string_view take(uint64_t n, const char* what) {
        if (n > bytes_.size() - pos_)
            fail("{} declares {} bytes but only {} are left in the file (a truncated or corrupt pickle)", what, n,
                 bytes_.size() - pos_);
        const std::string_view s = bytes_.substr(pos_, size_t(n));
        pos_ += size_t(n);
        return s;
    }
    uint64_t read_le(int n, const char* what) {
        const std::string_view s = take(uint64_t(n), what);
        uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[size_t(i)]);
        return v;
    }

    size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
    ValueId pop(const char* op) {
        if (stack_.size() <= base()) fail("{} needs a value but the stack is empty", op);
        const ValueId v = stack_.back();
        stack_.pop_back();
        return v;
    }
    ValueId top(const char* op) const {
        if (stack_.size() <= base()) fail("{} needs a value but the stack is empty", op);
        return stack_.back();
    }
    // The items pushed since the last MARK; the caller pops them with close_mark().
    size_t open_mark(const char* op) const {
        if (marks_.empty()) fail("{} without a MARK before it", op);
        return marks_.back();
    }
    void close_mark(size_t start) {
        stack_.resize(start);
        marks_.pop_back();
    }
    std::span<const ValueId> since(size_t start) const {
        return std::span<const ValueId>(stack_.data() + start, stack_.size() - start);
    }
    void push(ValueId v) { stack_.push_back(v); }
    ValueId container_of(ValueId v, PlainKind want, const char* op) const {
        if (data_.kind(v) != want)
            fail("{} adds to {} where {} was expected", op, plain_kind_name(data_.kind(v)), plain_kind_name(want));
        return v;
    }
    ValueId new_container(PlainKind kind, std::span<const ValueId> items) {
        const ValueId c = data_.add_container(kind);
        data_.append(c, items);
        return c;
    }

    void memo_put(uint64_t key) {
        const ValueId v = top("PUT");
        if (key < memo_.size())
            memo_[size_t(key)] = v;
        else if (key == memo_.size())
            memo_.push_back(v);
        else
            sparse_memo_[key] = v;
    }
    void memo_get(uint64_t key) {
        if (key < memo_.size()) return push(memo_[size_t(key)]);
        const auto it = sparse_memo_.find(key);
        if (it == sparse_memo_.end()) fail("GET of memo key {}, which was never stored", key);
        push(it->second);
    }

    int64_t read_long(uint64_t n) {
        const std::string_view s = take(n, "LONG");
        if (n == 0) return 0;
        const bool negative = uint8_t(s[size_t(n - 1)]) & 0x80;
        // Bytes past the 8th must only repeat the sign, and the 8th byte's top bit must agree with it.
        for (size_t i = 8; i < n; ++i)
            if (uint8_t(s[i]) != (negative ? 0xff : 0x00)) fail("an integer wider than 64 bits ({} bytes)", n);
        if (n > 8 && (bool(uint8_t(s[7]) & 0x80) != negative)) fail("an integer wider than 64 bits ({} bytes)", n);
        uint64_t v = negative ? ~uint64_t(0) : 0;
        const size_t used = std::min<size_t>(size_t(n), 8);
        for (size_t i = 0; i < used; ++i) {
            v &= ~(uint64_t(0xff) << (8 * i));
            v |= uint64_t(uint8_t(s[i])) << (8 * i);
        }
        return int64_t(v);
    }

    void step(uint8_t op) {
        switch (op) {
            case 0x80: {  // PROTO
                const uint64_t p = read_le(1, "PROTO");
                if (p < 2 || p > 5) fail("pickle protocol {}: Ultrascope reads protocols 2 to 5", p);
                return;
            }
            case 0x95: {  // FRAME: only a read-ahead hint; its length must still fit in the file
                const uint64_t n = read_le(8, "FRAME");
                if (n > bytes_.size() - pos_)
                    fail("FRAME declares {} bytes but only {} are left", n, bytes_.size() - pos_);
                return;
            }
            case '(':
                if (marks_.size() >= limits_.max_mark_depth)
                    fail("more than {} nested MARKs (hostile nesting?)", limits_.max_mark_depth);
                marks_.push_back(stack_.size());
                return;
            case '0':
                if (stack_.size() > base())
                    stack_.pop_back();
                else if (!marks_.empty())
                    marks_.pop_back();
                else
                    fail("POP on an empty stack");
                return;
            case '1':
                close_mark(open_mark("POP_MARK"));
                return;
            case '2':
                push(top("DUP"));
                return;
            case 'N':
                push(data_.add_none());
                return;
            case 0x88:
                push(data_.add_bool(true));
                return;
            case 0x89:
                push(data_.add_bool(false));
                return;
            case 'J':
                push(data_.add_int(int32_t(uint32_t(read_le(4, "BININT")))));
                return;
            case 'K':
                push(data_.add_int(int64_t(read_le(1, "BININT1"))));
                return;
            case 'M':
                push(data_.add_int(int64_t(read_le(2, "BININT2"))));
                return;
            case 0x8a:
                push(data_.add_int(read_long(read_le(1, "LONG1"))));
                return;
            case 0x8b:
                push(data_.add_int(read_long(read_le(4, "LONG4"))));
                return;
            case 'G': {
                uint64_t bits = 0;
                for (const char c : take(8, "BINFLOAT")) bits = (bits << 8) | uint8_t(c);
                push(data_.add_float(std::bit_cast<double>(bits)));
                return;
            }
            case 0x8c:
                push(data_.add_text(PlainKind::string, take(read_le(1, "SHORT_BINUNICODE"), "SHORT_BINUNICODE")));
                return;
            case 'X':
                push(data_.add_text(PlainKind::string, take(read_le(4, "BINUNICODE"), "BINUNICODE")));
                return;
            case 0x8d:
                push(data_.add_text(PlainKind::string, take(read_le(8, "BINUNICODE8"), "BINUNICODE8")));
                return;
            case 'U':
                push(data_.add_text(PlainKind::string, take(read_le(1, "SHORT_BINSTRING"), "SHORT_BINSTRING")));
                return;
            case 'T':
                push(data_.add_text(PlainKind::string, take(read_le(4, "BINSTRING"), "BINSTRING")));
                return;
            case 'C':
                push(data_.add_text(PlainKind::bytes, take(read_le(1, "SHORT_BINBYTES"), "SHORT_BINBYTES")));
                return;
            case 'B':
                push(data_.add_text(PlainKind::bytes, take(read_le(4, "BINBYTES"), "BINBYTES")));
                return;
            case 0x8e:
                push(data_.add_text(PlainKind::bytes, take(read_le(8, "BINBYTES8"), "BINBYTES8")));
                return;
            case 0x96:
                push(data_.add_text(PlainKind::bytes, take(read_le(8, "BYTEARRAY8"), "BYTEARRAY8")));
                return;
            case ']':
                push(data_.add_container(PlainKind::list));
                return;
            case ')':
                push(data_.add_container(PlainKind::tuple));
                return;
            case '}':
                push(data_.add_container(PlainKind::dict));
                return;
            case 0x8f:
                push(data_.add_container(PlainKind::set));
                return;
            case 'a': {
                const ValueId v = pop("APPEND");
                data_.append(container_of(top("APPEND"), PlainKind::list, "APPEND"), std::span<const ValueId>(&v, 1));
                return;
            }
            case 's': {
                const ValueId v = pop("SETITEM"), k = pop("SETITEM");
                const ValueId kv[2] = {k, v};
                data_.append(container_of(top("SETITEM"), PlainKind::dict, "SETITEM"), kv);
                return;
            }
            case 'e':
            case 'u':
            case 0x90: {  // APPENDS, SETITEMS, ADDITEMS
                const char* name = op == 'e' ? "APPENDS" : op == 'u' ? "SETITEMS" : "ADDITEMS";
                const PlainKind want = op == 'e' ? PlainKind::list : op == 'u' ? PlainKind::dict : PlainKind::set;
                const size_t start = open_mark(name);
                const size_t outer = marks_.size() >= 2 ? marks_[marks_.size() - 2] : 0;
                if (start <= outer) fail("{} has no container below its MARK", name);
                if (op == 'u' && (stack_.size() - start) % 2) fail("SETITEMS with an odd number of keys and values");
                data_.append(container_of(stack_[start - 1], want, name), since(start));
                close_mark(start);
                return;
            }
            case 'l':
            case 't':
            case 'd':
            case 0x91: {  // LIST, TUPLE, DICT, FROZENSET
                const PlainKind kind = op == 'l'   ? PlainKind::list
                                       : op == 't' ? PlainKind::tuple
                                       : op == 'd' ? PlainKind::dict
                                                   : PlainKind::set;
                const size_t start = open_mark("LIST/TUPLE/DICT");
                if (op == 'd' && (stack_.size() - start) % 2) fail("DICT with an odd number of keys and values");
                const ValueId c = new_container(kind, since(start));
                close_mark(start);
                push(c);
                return;
            }
            case 0x85:
            case 0x86:
            case 0x87: {  // TUPLE1..3
                const size_t n = op - 0x84;
                if (stack_.size() < base() + n) fail("TUPLE{} needs {} values on the stack", n, n);
                const ValueId c = new_container(PlainKind::tuple, since(stack_.size() - n));
                stack_.resize(stack_.size() - n);
                push(c);
                return;
            }
            case 'q':
                memo_put(read_le(1, "BINPUT"));
                return;
            case 'r':
                memo_put(read_le(4, "LONG_BINPUT"));
                return;
            case 0x94:
                memo_put(memo_.size() + sparse_memo_.size());
                return;
            case 'h':
                memo_get(read_le(1, "BINGET"));
                return;
            case 'j':
                memo_get(read_le(4, "LONG_BINGET"));
                return;
            default:
                break;
        }
        if (const char* name = refused_opcode_name(op))
            fail(
                "opcode {} (0x{:02x}) is a class or a call: Ultrascope reads plain data only and never executes a "
                "pickle (a PyTorch memory snapshot is a plain dict; re-dump it with torch.cuda.memory._dump_snapshot)",
                name, op);
        if (const char* name = text_opcode_name(op))
            fail(
                "opcode {} is from pickle protocol 0 or 1: Ultrascope reads protocols 2 to 5 (re-dump with "
                "pickle.dump(..., protocol=4))",
                name);
        fail("unknown pickle opcode 0x{:02x} (not a pickle, or a corrupt one)", op);
    }
};

}  // namespace

bool looks_like_pickle(std::string_view bytes) {
    return bytes.size() >= 2 && uint8_t(bytes[0]) == 0x80 && uint8_t(bytes[1]) >= 2 && uint8_t(bytes[1]) <= 5;
}

PlainData read_pickle(std::string_view bytes, const std::string& source, const PickleLimits& limits) {
    return PickleMachine(bytes, source, limits).run();
}

}  // namespace us::snap
