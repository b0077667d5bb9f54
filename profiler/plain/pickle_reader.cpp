// The plain-data pickle machine (pickle_reader.h): a loop over opcodes with an explicit value stack and mark stack.
// Opcodes that name a class, call something or look up a persistent id are refused before anything else happens.
#include "profiler/plain/pickle_reader.h"

#include <fmt/core.h>

#include <bit>
#include <cstring>
#include <unordered_map>

#include "common/core/check.h"
#include "profiler/plain/pickle_opcodes.h"

namespace us::plain {
namespace {

class PickleMachine {
public:
    PickleMachine(std::string_view bytes, const std::string& source, const PickleLimits& limits, PlainData&& reuse)
        : bytes_(bytes), source_(source), limits_(limits), data_(std::move(reuse)) {
        data_.clear();
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

    // One opcode, dispatched to its family; what is not plain data of protocols 2 to 5 is refused.
    void step(uint8_t op) {
        switch (op) {
            case 0x80:  // PROTO
            case 0x95:  // FRAME
                return framing(op);
            case '(':
            case '0':
            case '1':
            case '2':  // MARK, POP, POP_MARK, DUP
                return stack_op(op);
            case 'N':
            case 0x88:
            case 0x89:
            case 'J':
            case 'K':
            case 'M':
            case 0x8a:
            case 0x8b:
            case 'G':  // NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, LONG1, LONG4, BINFLOAT
                return push_scalar(op);
            case 0x8c:
            case 'X':
            case 0x8d:
            case 'U':
            case 'T':
            case 'C':
            case 'B':
            case 0x8e:
            case 0x96:  // the strings and bytes with a length (kSizedTextOpcodes)
                return push_text(op);
            case ']':
            case ')':
            case '}':
            case 0x8f:  // EMPTY_LIST, EMPTY_TUPLE, EMPTY_DICT, EMPTY_SET
                return push_empty_container(op);
            case 'a':
            case 's':
            case 'e':
            case 'u':
            case 0x90:  // APPEND, SETITEM, APPENDS, SETITEMS, ADDITEMS
                return add_to_container(op);
            case 'l':
            case 't':
            case 'd':
            case 0x91:
            case 0x85:
            case 0x86:
            case 0x87:  // LIST, TUPLE, DICT, FROZENSET, TUPLE1..3
                return build_container(op);
            case 'q':
            case 'r':
            case 0x94:
            case 'h':
            case 'j':  // BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET
                return memo_op(op);
            default:
                return refuse(op);
        }
    }

    // PROTO and FRAME: the protocol must be 2 to 5; a FRAME is only a read-ahead hint, but its length must still
    // fit in the file.
    void framing(uint8_t op) {
        if (op == 0x80) {
            const uint64_t p = read_le(1, "PROTO");
            if (p < 2 || p > 5) fail("pickle protocol {}: Ultrascope reads protocols 2 to 5", p);
            return;
        }
        const uint64_t n = read_le(8, "FRAME");
        if (n > bytes_.size() - pos_) fail("FRAME declares {} bytes but only {} are left", n, bytes_.size() - pos_);
    }

    // MARK, POP, POP_MARK and DUP: the stack and mark stack themselves.
    void stack_op(uint8_t op) {
        switch (op) {
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
            default:  // '2'
                push(top("DUP"));
                return;
        }
    }

    // None, booleans, integers and floats.
    void push_scalar(uint8_t op) {
        switch (op) {
            case 'N':
                return push(data_.add_none());
            case 0x88:
                return push(data_.add_bool(true));
            case 0x89:
                return push(data_.add_bool(false));
            case 'J':
                return push(data_.add_int(int32_t(uint32_t(read_le(4, "BININT")))));
            case 'K':
                return push(data_.add_int(int64_t(read_le(1, "BININT1"))));
            case 'M':
                return push(data_.add_int(int64_t(read_le(2, "BININT2"))));
            case 0x8a:
                return push(data_.add_int(read_long(read_le(1, "LONG1"))));
            case 0x8b:
                return push(data_.add_int(read_long(read_le(4, "LONG4"))));
            default: {  // 'G': BINFLOAT, big-endian
                uint64_t bits = 0;
                for (const char c : take(8, "BINFLOAT")) bits = (bits << 8) | uint8_t(c);
                return push(data_.add_float(std::bit_cast<double>(bits)));
            }
        }
    }

    // A string or bytes: its length, then that many bytes.
    void push_text(uint8_t op) {
        for (const TextOpcode& t : kSizedTextOpcodes)
            if (t.op == op) return push(data_.add_text(t.kind, take(read_le(t.length_bytes, t.name), t.name)));
    }

    void push_empty_container(uint8_t op) {
        const PlainKind kind = op == ']'   ? PlainKind::list
                               : op == ')' ? PlainKind::tuple
                               : op == '}' ? PlainKind::dict
                                           : PlainKind::set;
        push(data_.add_container(kind));
    }

    // APPEND, SETITEM and, from the items since the last MARK, APPENDS, SETITEMS, ADDITEMS: into the container
    // below them.
    void add_to_container(uint8_t op) {
        if (op == 'a') {
            const ValueId v = pop("APPEND");
            data_.append(container_of(top("APPEND"), PlainKind::list, "APPEND"), std::span<const ValueId>(&v, 1));
            return;
        }
        if (op == 's') {
            const ValueId v = pop("SETITEM"), k = pop("SETITEM");
            const ValueId kv[2] = {k, v};
            data_.append(container_of(top("SETITEM"), PlainKind::dict, "SETITEM"), kv);
            return;
        }
        const char* name = op == 'e' ? "APPENDS" : op == 'u' ? "SETITEMS" : "ADDITEMS";
        const PlainKind want = op == 'e' ? PlainKind::list : op == 'u' ? PlainKind::dict : PlainKind::set;
        const size_t start = open_mark(name);
        const size_t outer = marks_.size() >= 2 ? marks_[marks_.size() - 2] : 0;
        if (start <= outer) fail("{} has no container below its MARK", name);
        if (op == 'u' && (stack_.size() - start) % 2) fail("SETITEMS with an odd number of keys and values");
        data_.append(container_of(stack_[start - 1], want, name), since(start));
        close_mark(start);
    }

    // LIST, TUPLE, DICT, FROZENSET from the items since the last MARK; TUPLE1..3 from the top one to three.
    void build_container(uint8_t op) {
        if (op >= 0x85 && op <= 0x87) {
            const size_t n = op - 0x84;
            if (stack_.size() < base() + n) fail("TUPLE{} needs {} values on the stack", n, n);
            const ValueId c = new_container(PlainKind::tuple, since(stack_.size() - n));
            stack_.resize(stack_.size() - n);
            push(c);
            return;
        }
        const PlainKind kind = op == 'l'   ? PlainKind::list
                               : op == 't' ? PlainKind::tuple
                               : op == 'd' ? PlainKind::dict
                                           : PlainKind::set;
        const size_t start = open_mark("LIST/TUPLE/DICT");
        if (op == 'd' && (stack_.size() - start) % 2) fail("DICT with an odd number of keys and values");
        const ValueId c = new_container(kind, since(start));
        close_mark(start);
        push(c);
    }

    // BINPUT, LONG_BINPUT, MEMOIZE store the top of the stack; BINGET, LONG_BINGET push a stored value.
    void memo_op(uint8_t op) {
        switch (op) {
            case 'q':
                return memo_put(read_le(1, "BINPUT"));
            case 'r':
                return memo_put(read_le(4, "LONG_BINPUT"));
            case 0x94:
                return memo_put(memo_.size() + sparse_memo_.size());
            case 'h':
                return memo_get(read_le(1, "BINGET"));
            default:  // 'j'
                return memo_get(read_le(4, "LONG_BINGET"));
        }
    }

    // Every other opcode: a class or a call, protocol 0 or 1's text, or not a pickle opcode at all.
    [[noreturn]] void refuse(uint8_t op) const {
        if (const char* name = opcode_name(kRefusedOpcodes, op))
            fail(
                "opcode {} (0x{:02x}) is a class or a call: Ultrascope reads plain data only and never executes a "
                "pickle (a PyTorch memory snapshot is a plain dict; re-dump it with torch.cuda.memory._dump_snapshot)",
                name, op);
        if (const char* name = opcode_name(kTextOpcodes, op))
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
    return PickleMachine(bytes, source, limits, PlainData{}).run();
}

PlainData read_pickle(std::string_view bytes, const std::string& source, PlainData&& reuse,
                      const PickleLimits& limits) {
    return PickleMachine(bytes, source, limits, std::move(reuse)).run();
}

}  // namespace us::plain
