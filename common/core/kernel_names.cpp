// Kernel names made short (kernel_names.h). A demangled name is read as C++ without a grammar: split at the
// "::" and "," that lie outside every bracket, which is all a name's shape needs; brackets that do not balance
// (a hostile or cut name) end a part where they start, so the worst case is a shorter name, never a throw.
#include "common/core/kernel_names.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

namespace us {

namespace {

// Deeper template nesting than real kernels have (CUTLASS's reach ~10) is left unread: a bound on the recursion.
constexpr int kMaxDepth = 24;
// At most this many template arguments make the summary ("multi_tensor_apply_kernel<BinaryOpScalarFunctor,
// multiplies>").
constexpr size_t kMaxSummary = 3;
// Longer mangled names are not demangled (real ones stay under a few kilobytes).
constexpr size_t kMaxMangled = 16384;

bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool opens(char c) { return c == '<' || c == '(' || c == '[' || c == '{'; }
bool closes(std::string_view s, size_t i) {
    const char c = s[i];
    if (c == '>') return i == 0 || s[i - 1] != '-';  // "->" (as in "Memcpy DtoD (Device -> Device)") is no bracket
    return c == ')' || c == ']' || c == '}';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}
bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

// The index of the bracket that closes the one at `open`, or npos when it never does.
size_t match(std::string_view s, size_t open) {
    int depth = 0;
    for (size_t i = open; i < s.size(); ++i) {
        if (opens(s[i]))
            ++depth;
        else if (closes(s, i) && --depth == 0)
            return i;
    }
    return std::string_view::npos;
}

// `s` split at `sep` where it lies outside every bracket.
std::vector<std::string_view> split_top(std::string_view s, std::string_view sep) {
    std::vector<std::string_view> parts;
    int depth = 0;
    size_t from = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (opens(s[i]))
            ++depth;
        else if (closes(s, i))
            depth = std::max(0, depth - 1);
        else if (depth == 0 && s.compare(i, sep.size(), sep) == 0) {
            parts.push_back(trim(s.substr(from, i - from)));
            from = i + sep.size();
            i = from - 1;
        }
    }
    parts.push_back(trim(s.substr(from)));
    return parts;
}

// One "::" part of a qualified name: "gpu_kernel_impl<F>(at::TensorIteratorBase&)", "{lambda(int)#1}",
// "operator()<at::native::TensorAssign>(...) const", "(anonymous namespace)".
struct Part {
    std::string_view name;  // "gpu_kernel_impl", "operator()", "" for a lambda or an anonymous namespace
    std::vector<std::string_view> args;
    bool lambda = false;
};

Part parse_part(std::string_view p) {
    Part part;
    p = trim(p);
    if (starts(p, "{") || starts(p, "(anonymous")) {
        part.lambda = starts(p, "{");
        return part;
    }
    size_t i = 0;
    if (starts(p, "operator()")) {
        i = 10;
    } else {
        while (i < p.size() && p[i] != '<' && p[i] != '(' && p[i] != ' ') ++i;
    }
    part.name = p.substr(0, i);
    if (i < p.size() && p[i] == '<') {
        const size_t close = match(p, i);
        part.args = split_top(close == std::string_view::npos ? p.substr(i + 1) : p.substr(i + 1, close - i - 1), ",");
    }
    return part;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return out;
}

// Arguments that hold the launch's data, not its work: CUTLASS's and cuBLAS's parameter blocks, CUB's policies.
bool plumbing(std::string_view name) {
    const std::string l = lower(name);
    for (std::string_view suffix : {"params", "param", "params_t", "args", "arguments", "storage", "metadata",
                                    "accessor", "calculator", "info", "traits", "state", "struct", "decomposer_t"})
        if (ends(l, suffix)) return true;
    return l.find("policy") != std::string::npos;
}

// A template argument that says what a kernel computes: a functor, an op, an epilogue, a scatter's reduction,
// the standard library's arithmetic.
bool functor_like(std::string_view name) {
    if (plumbing(name)) return false;  // CUB's ReduceByKeyScanTileState
    const std::string l = lower(name);
    if (l.find("functor") != std::string::npos) return true;
    for (std::string_view suffix : {"Op", "Ops", "_op", "_ops", "Epilogue", "Assign"})
        if (ends(name, suffix) && name.size() > suffix.size()) return true;
    if (starts(name, "Reduce") && name.size() > 6 && name[6] >= 'A' && name[6] <= 'Z') return true;  // ReduceAdd
    for (std::string_view f :
         {"plus",       "minus",       "multiplies", "divides",      "modulus", "negate", "logical_and",
          "logical_or", "logical_not", "equal_to",   "not_equal_to", "greater", "less",   "greater_equal",
          "less_equal", "bit_and",     "bit_or",     "bit_xor",      "maximum", "minimum"})
        if (name == f) return true;
    return false;
}

// A type that says only a size or an element type, or a value: never the kernel's name.
bool scalar_like(std::string_view arg) {
    arg = trim(arg);
    if (arg.empty()) return true;
    const char c = arg.front();
    if ((c >= '0' && c <= '9') || c == '-' || c == '(' || arg == "true" || arg == "false" || arg == "nullptr")
        return true;  // a value, or a cast value: "(cudnnKernelDataType_t)0"
    if (arg.back() == '*' || arg.back() == '&' || starts(arg, "decltype")) return true;
    std::string_view last = split_top(arg, "::").back();
    last = last.substr(0, std::min(last.find('<'), last.size()));
    const std::string l = lower(last);
    for (std::string_view word : {"unsigned", "signed", "long", "short", "int", "char", "const", "volatile"})
        if (starts(l, word)) return true;  // "unsigned int", "long long", "int", "char"
    for (std::string_view t : {"bool", "float", "double", "half", "__half", "half_t", "bfloat16", "bfloat16_t",
                               "__nv_bfloat16", "nv_bfloat16", "__nv_half", "tfloat32_t", "complex", "size_t"})
        if (l == t) return true;
    if (starts(l, "float") || starts(l, "double") || starts(l, "__nv_fp8") || starts(l, "uint") || starts(l, "int") ||
        starts(l, "opaquetype"))
        return true;  // float2, Float8_e4m3fn, int64_t, uint8_t, OpaqueType<4>
    return false;
}

void add_unique(std::vector<std::string>& items, std::string item) {
    if (std::find(items.begin(), items.end(), item) == items.end()) items.push_back(std::move(item));
}

std::vector<std::string> summarize(std::string_view arg, int depth);

std::vector<std::string> summarize_args(const std::vector<std::string_view>& args, int depth) {
    std::vector<std::string> items;
    for (std::string_view a : args)
        for (std::string& s : summarize(a, depth + 1)) add_unique(items, std::move(s));
    return items;
}

// What a template argument says: a lambda, the function it comes from (or what that function's template
// arguments say); a wrapper (BinaryFunctor<float, float, float, MulFunctor<float>>), what its arguments say; a
// functor, its name; anything else, nothing.
std::vector<std::string> summarize(std::string_view arg, int depth) {
    arg = trim(arg);
    if (depth > kMaxDepth || scalar_like(arg)) return {};
    const std::vector<std::string_view> parts = split_top(arg, "::");
    const bool lambda = std::any_of(parts.begin(), parts.end(), [](std::string_view p) { return starts(p, "{"); });
    if (lambda) {
        for (size_t i = parts.size(); i-- > 0;) {
            const Part p = parse_part(parts[i]);
            if (p.lambda) continue;
            std::vector<std::string> inner = summarize_args(p.args, depth);
            if (!inner.empty()) return inner;
            // sum_functor<float>::operator()(...)::{lambda(float, float)#1} comes from sum_functor.
            if (p.name.empty() || p.name == "operator()") continue;
            return {std::string(p.name)};
        }
        return {};
    }
    const Part last = parse_part(parts.back());
    std::vector<std::string> inner = summarize_args(last.args, depth);
    if (!inner.empty()) return inner;
    if (functor_like(last.name)) return {std::string(last.name)};
    return {};
}

// A name that says nothing by itself: CUTLASS's "Kernel"/"Kernel2"/"device_kernel", cuBLAS's "kernel" and
// cuBLASLt's "globalKernel".
bool generic_name(std::string_view name) {
    std::string l;
    for (char c : lower(name))
        if (c != '_' && !(c >= '0' && c <= '9')) l += c;
    return l == "kernel" || l == "devicekernel" || l == "globalkernel";
}

// The class a generic kernel runs (cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>): its first argument that
// is a class of its own, through SFINAE wrappers (flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>).
std::string_view class_argument(const std::vector<std::string_view>& args, int depth) {
    for (std::string_view a : args) {
        if (scalar_like(a)) continue;
        const Part p = parse_part(split_top(a, "::").back());
        if (p.name.empty() || p.lambda || plumbing(p.name)) continue;
        if (starts(p.name, "enable_") && depth < kMaxDepth) return class_argument(p.args, depth + 1);
        return p.name;
    }
    return {};
}

// A namespace that names nothing of its own, so a generic kernel's shown scope takes the one above it too.
bool thin_scope(std::string_view name) {
    return name == "impl" || name == "detail" || name == "internal" || name == "kernel" || name == "device";
}

// A name as C++ (demangled, with namespaces, templates or a parameter list), against a plain one ("Memset
// (Device)", "ampere_sgemm_128x64_tn").
bool cpp_name(std::string_view s) {
    if (starts(s, "void ") || s.find("::") != std::string_view::npos) return true;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '<') return true;
        if (s[i] == '(' && i > 0 && (ident_char(s[i - 1]) || s[i - 1] == '>')) return true;
    }
    return false;
}

// What a mangled name that the demangler refuses still says (HTA's A100 trace has such a CUTLASS name): the
// source names of its nested name and of its first template argument's, "_ZN19cutlass_cudnn_train6KernelINS_4conv6
// kernel23ImplicitGemmConvolutionI..." -> "cutlass_cudnn_train::Kernel<conv::kernel::ImplicitGemmConvolution>".
// Empty when it says none.
std::string rough_demangle(std::string_view m) {
    size_t i = 2;  // past "_Z"
    auto names = [&]() {
        std::string out;
        if (i < m.size() && m[i] == 'N') ++i;
        while (i < m.size()) {
            const char c = m[i];
            if (c == 'S') {  // a substitution: "St" (std::), "S_", "S3_"
                ++i;
                if (i < m.size() && m[i] >= 'a' && m[i] <= 'z') {
                    ++i;
                    continue;
                }
                while (i < m.size() && m[i] != '_') ++i;
                ++i;
            } else if (c == 'K' || c == 'V' || c == 'r') {  // cv-qualifiers
                ++i;
            } else if (c >= '0' && c <= '9') {
                size_t len = 0;
                while (i < m.size() && m[i] >= '0' && m[i] <= '9' && len < m.size())
                    len = len * 10 + size_t(m[i++] - '0');
                if (len == 0 || len > m.size() - i) break;
                if (!out.empty()) out += "::";
                out += m.substr(i, len);
                i += len;
            } else {
                break;
            }
        }
        return out;
    };
    std::string text = names();
    if (text.empty()) return {};
    if (i < m.size() && m[i] == 'I') {
        ++i;
        if (const std::string arg = names(); !arg.empty()) text += "<" + arg + ">";
    }
    return text;
}

}  // namespace

std::string demangle_name(std::string_view name) {
    std::string text(name);
    if (!starts(text, "_Z") || text.size() > kMaxMangled) return text;
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> demangled(abi::__cxa_demangle(text.c_str(), nullptr, nullptr, &status),
                                                          &std::free);
    if (status == 0 && demangled) text = demangled.get();
    return text;
}

KernelNameParts kernel_name_parts(std::string_view full) {
    KernelNameParts out;
    std::string text = demangle_name(trim(full));
    if (starts(text, "_Z"))  // the demangler refused it
        if (std::string rough = rough_demangle(text); !rough.empty()) text = std::move(rough);
    std::string_view s = trim(text);
    if (!cpp_name(s)) {
        out.name = std::string(s);
        return out;
    }
    if (const size_t clone = s.find(" [clone"); clone != std::string_view::npos) s = trim(s.substr(0, clone));
    // The parameter list: the first "(" outside brackets right after a name or its template arguments.
    int depth = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (depth == 0 && s[i] == '(' && i > 0 && (ident_char(s[i - 1]) || s[i - 1] == '>')) {
            s = s.substr(0, i);
            break;
        }
        if (opens(s[i]))
            ++depth;
        else if (closes(s, i))
            depth = std::max(0, depth - 1);
    }
    // The return type ("void ", "std::enable_if<!(false), void>::type "): what precedes the last space outside
    // brackets.
    depth = 0;
    size_t begin = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (opens(s[i]))
            ++depth;
        else if (closes(s, i))
            depth = std::max(0, depth - 1);
        else if (depth == 0 && s[i] == ' ')
            begin = i + 1;
    }
    s = trim(s.substr(begin));
    const std::vector<std::string_view> parts = split_top(s, "::");
    const Part last = parse_part(parts.back());
    if (last.name.empty()) {  // nothing a name can be read from: the text as it is
        out.name = std::string(trim(text));
        return out;
    }
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const Part p = parse_part(parts[i]);
        if (p.name.empty()) continue;
        if (!out.scope.empty()) out.scope += "::";
        out.scope += p.name;
    }
    const std::vector<std::string> items = summarize_args(last.args, 0);
    for (size_t i = 0; i < std::min(items.size(), kMaxSummary); ++i) {
        if (i > 0) out.summary += ", ";
        out.summary += items[i];
    }
    out.name = std::string(last.name);
    if (generic_name(last.name)) {
        if (const std::string_view named = class_argument(last.args, 0); !named.empty()) {
            out.name = std::string(named);
            out.summary.clear();
            return out;
        }
        // The nearest namespace (two when the nearest is "impl", "detail" ...) says whose kernel it is.
        std::vector<std::string_view> scopes;
        for (size_t i = parts.size() - 1; i-- > 0 && scopes.size() < 2;) {
            const Part p = parse_part(parts[i]);
            if (p.name.empty()) continue;
            scopes.insert(scopes.begin(), p.name);
            if (!thin_scope(p.name)) break;
        }
        for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) out.name = std::string(*it) + "::" + out.name;
    }
    return out;
}

std::string short_kernel_name(std::string_view full) {
    KernelNameParts p = kernel_name_parts(full);
    return p.summary.empty() ? std::move(p.name) : p.name + "<" + p.summary + ">";
}

}  // namespace us
