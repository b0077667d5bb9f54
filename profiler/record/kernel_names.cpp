#include "profiler/record/kernel_names.h"

#include <algorithm>
#include <cctype>

#include "common/core/kernel_names.h"

namespace us::prof {

namespace {

bool contains_nocase(std::string_view text, std::string_view word) {
    auto equal = [](char a, char b) { return std::tolower(uint8_t(a)) == std::tolower(uint8_t(b)); };
    return std::search(text.begin(), text.end(), word.begin(), word.end(), equal) != text.end();
}

// NCCL's collective from its kernel name. Longer tokens first: "AllReduce" and "ReduceScatter" contain "Reduce".
OpClass nccl_collective(std::string_view name) {
    struct Token {
        std::string_view text;
        OpClass op;
    };
    static constexpr Token kTokens[] = {
        {"ReduceScatter", OpClass::reduce_scatter},
        {"AllReduce", OpClass::all_reduce},
        {"AllGather", OpClass::all_gather},
        {"Broadcast", OpClass::broadcast},
        {"SendRecv", OpClass::send},
        {"AllToAll", OpClass::all_to_all},
        {"Send", OpClass::send},
        {"Recv", OpClass::recv},
    };
    for (const Token& t : kTokens)
        if (contains_nocase(name, t.text)) return t.op;
    return OpClass::none;  // a rooted Reduce, or the "Generic" kernel of grouped operations: the launching op says
}

}  // namespace

KernelClass classify_kernel(std::string_view name) {
    KernelClass k;
    if (contains_nocase(name, "nccl")) {
        k.nccl = true;
        k.op = nccl_collective(name);
        return k;
    }
    // The kinds' rule table (common/core/kernel_names.h) knows cuBLAS's names (sgemm, xmma_gemm, its Hopper and
    // Blackwell nvjet), CUTLASS's and their split-K reductions; a convolution's implicit GEMM is GEMM work too.
    const KernelKind kind = kernel_kind(name);
    if (kind == KernelKind::gemm || kind == KernelKind::conv) k.op = OpClass::gemm;
    return k;
}

std::string readable_kernel_name(std::string_view name) {
    std::string text = demangle_name(name);
    // The parameter list: the parenthesised group that ends the name.
    if (!text.empty() && text.back() == ')') {
        int depth = 0;
        for (size_t i = text.size(); i-- > 0;) {
            if (text[i] == ')')
                ++depth;
            else if (text[i] == '(' && --depth == 0) {
                if (i > 0) text.resize(i);
                break;
            }
        }
    }
    // Template functions carry their return type; a kernel's is void.
    if (text.rfind("void ", 0) == 0) text.erase(0, 5);
    return text;
}

}  // namespace us::prof
