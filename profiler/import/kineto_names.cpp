// Name rules of the Kineto mapping (kineto_names.h). Names are compared case-insensitively with '_', ':' and
// spaces ignored, so "all_reduce", "allreduce_" and "AllReduce" read alike.
#include "profiler/import/kineto_names.h"

#include <cctype>
#include <string>

#include "common/core/kernel_names.h"

namespace us::prof {

namespace {
// Lower-case letters and digits only, at most 96 of them (the part of a name these rules read).
std::string squeeze(std::string_view s) {
    std::string out;
    out.reserve(std::min<size_t>(s.size(), 96));
    for (char c : s) {
        if (out.size() >= 96) break;
        if (c >= 'A' && c <= 'Z')
            out += char(c - 'A' + 'a');
        else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            out += c;
        else if (c == '(' || c == '<')
            break;  // a kernel's signature: its name is before
    }
    return out;
}
bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
bool starts(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
}  // namespace

bool is_collective_op_name(std::string_view name) {
    if (is_collective_wait_name(name)) return false;
    return name == "record_param_comms" || starts(name, "c10d::") || starts(name, "_c10d_functional::") ||
           starts(name, "gloo:") || starts(name, "nccl:");
}

bool is_collective_wait_name(std::string_view name) {
    return name == "_c10d_functional::wait_tensor" || name == "c10d::wait" || starts(name, "c10d::wait_");
}

bool is_nccl_kernel_name(std::string_view name) { return starts(name, "nccl"); }

OpClass collective_of(std::string_view name) {
    const std::string s = squeeze(name);
    if (has(s, "reducescatter")) return OpClass::reduce_scatter;
    if (has(s, "allgather")) return OpClass::all_gather;
    if (has(s, "alltoall")) return OpClass::all_to_all;
    if (has(s, "allreduce")) return OpClass::all_reduce;
    if (has(s, "broadcast") || has(s, "bcast")) return OpClass::broadcast;
    if (has(s, "barrier")) return OpClass::barrier;
    if (has(s, "sendrecv")) return OpClass::send;  // NCCL's one kernel for both directions
    if (has(s, "recv")) return OpClass::recv;
    if (has(s, "send")) return OpClass::send;
    if (has(s, "gather")) return OpClass::all_gather;
    if (has(s, "scatter")) return OpClass::reduce_scatter;
    if (has(s, "reduce")) return OpClass::all_reduce;
    return OpClass::none;
}

int dtype_bytes(std::string_view dtype) {
    std::string s = squeeze(dtype);
    if (starts(s, "c10")) s.erase(0, 3);
    if (starts(s, "torch")) s.erase(0, 5);
    if (starts(s, "complexdouble") || s == "complex128") return 16;
    if (starts(s, "complexfloat") || s == "complex64") return 8;
    if (starts(s, "complexhalf") || s == "complex32") return 4;
    if (starts(s, "float8") || s == "byte" || s == "char" || s == "bool" || s == "int8" || s == "uint8" ||
        s == "qint8" || s == "quint8")
        return 1;
    if (s == "double" || s == "float64" || s == "long" || s == "int64" || s == "uint64") return 8;
    if (s == "float" || s == "float32" || s == "int" || s == "int32" || s == "uint32" || s == "qint32") return 4;
    if (s == "half" || s == "float16" || s == "bfloat16" || s == "short" || s == "int16" || s == "uint16") return 2;
    return 0;
}

namespace {

// A GPU's work, named as Kineto names kernels, memcpys and memsets ("void at::native::...(...)",
// "ampere_sgemm_128x64_tn", "Memcpy DtoD (Device -> Device)"), against a CPU op ("aten::mm", "Optimizer.step#...",
// "autograd::engine::evaluate_function: MmBackward0", "nn.Module: Linear_0").
bool kernel_like_name(std::string_view name) {
    if (starts(name, "void ") || starts(name, "_Z") || starts(name, "Memcpy") || starts(name, "Memset")) return true;
    for (std::string_view cpu : {"aten::", "c10d::", "_c10d_functional::", "autograd::", "torch::", "prim::"})
        if (starts(name, cpu)) return false;
    // A C identifier ("ampere_sgemm_128x64_tn"), or a C++ name followed by its template arguments or parameters
    // ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ...)"); a qualified name alone is a CPU op's
    // ("fsdp::all_gather_copy_in").
    size_t i = 0;
    while (i < name.size() && (std::isalnum(uint8_t(name[i])) || name[i] == '_' || name[i] == ':')) ++i;
    if (i == 0) return false;
    return i == name.size() ? name.find("::") == std::string_view::npos : name[i] == '<' || name[i] == '(';
}

// The op class of a kernel's kind (common/core/kernel_names.h), where the op classes have one.
OpClass op_class_of_kind(KernelKind kind) {
    switch (kind) {
        case KernelKind::gemm:
            return OpClass::gemm;
        case KernelKind::attention:
            return OpClass::attention;
        case KernelKind::norm:
            return OpClass::norm;
        case KernelKind::elementwise:
            return OpClass::activation;
        case KernelKind::embedding:
            return OpClass::embedding;
        case KernelKind::optimizer:
            return OpClass::optimizer;
        default:  // conv, reduction, memory, communication, other
            return OpClass::none;
    }
}

}  // namespace

OpClass compute_class_of(std::string_view name) {
    // A kernel by the kinds' rule table, on its name rather than its namespaces: fbgemm_gpu's
    // permute_indices_weights_kernel is no GEMM.
    if (kernel_like_name(name)) {
        const KernelKind kind = kernel_kind(name);
        if (kind == KernelKind::reduction) {  // a loss's kernels (nll_loss_forward_reduce_...) are the loss's
            const std::string s = squeeze(short_kernel_name(name));
            if (has(s, "loss") || has(s, "crossentropy")) return OpClass::loss;
        }
        return op_class_of_kind(kind);
    }
    const std::string s = squeeze(name);
    // A loss before the softmax test: CrossEntropyLoss is log_softmax + nll_loss, and attention's softmax is no log.
    if (has(s, "crossentropy") || has(s, "nllloss") || has(s, "loss") || has(s, "logsoftmax")) return OpClass::loss;
    if (has(s, "flash") || has(s, "attention") || has(s, "fmha") || has(s, "sdpa") || has(s, "softmax"))
        return OpClass::attention;
    if (has(s, "gemm") || s == "atenmm" || s == "atenbmm" || has(s, "addmm") || has(s, "matmul") ||
        has(s, "atenlinear") || has(s, "cutlass") || has(s, "xmma"))
        return OpClass::gemm;
    if (has(s, "norm")) return OpClass::norm;
    if (has(s, "embedding")) return OpClass::embedding;
    if (has(s, "optimizer") || has(s, "adam") || has(s, "sgd") || has(s, "multitensorapply")) return OpClass::optimizer;
    // ReLU's own ops too: aten::relu runs clamp_min, its backward threshold_backward.
    if (has(s, "gelu") || has(s, "relu") || has(s, "silu") || has(s, "elementwise") || has(s, "atenadd") ||
        has(s, "atenmul") || has(s, "copy") || has(s, "clampmin") || has(s, "thresholdbackward"))
        return OpClass::activation;
    return OpClass::none;
}

Phase phase_of_annotation(std::string_view name) {
    if (starts(name, "autograd::engine::evaluate_function") || starts(name, "## backward") ||
        name.find("Backward") != std::string_view::npos)
        return Phase::backward;
    if (starts(name, "Optimizer.step") || starts(name, "Optimizer.zero_grad") || starts(name, "optimizer.step") ||
        starts(name, "## optimizer"))
        return Phase::optimizer;
    return Phase::none;
}

std::string_view group_kind_of_description(std::string_view desc) {
    const std::string s = squeeze(desc);
    if (s.empty()) return {};
    if (s == "defaultpg" || s == "world" || s == "0") return "world";
    // Megatron-LM's names first (they are long), then device-mesh dimension names (torchtitan: mesh_tp, mesh_dp_shard).
    if (has(s, "tensormodelparallel") || has(s, "tensorparallel")) return "tp";
    if (has(s, "pipelinemodelparallel") || has(s, "pipelineparallel")) return "pp";
    if (has(s, "contextparallel")) return "cp";
    if (has(s, "expertmodelparallel") || has(s, "expertparallel")) return "ep";
    if (has(s, "dataparallel") || has(s, "dpshard") || has(s, "dpreplicate") || has(s, "fsdp") || has(s, "ddp"))
        return "dp";
    std::string tail = s;
    if (starts(tail, "mesh")) tail.erase(0, 4);
    for (std::string_view kind : {"dp", "tp", "pp", "cp", "ep"})
        if (tail == kind || starts(tail, kind)) return kind;
    return {};
}

}  // namespace us::prof
