// The kind of a kernel from its name (kernel_names.h): one ordered table of token rules, documented in
// docs/pytorch-traces.md ("Kernel names and classes"). A name is read as words, lower case, each between '_':
// "nchwToNhwcKernel" is "_nchw_to_nhwc_kernel_", "ampere_sgemm_128x64_tn" is "_ampere_sgemm_128_x_64_tn_". A rule's
// token is matched in that text, its '_' marking a word's edge: "_gemm" is a word that starts with gemm (gemm,
// gemmk1), "norm_" one that ends with norm (layernorm, rmsnorm), "_mm_" the word mm alone. So a namespace such as
// fbgemm_gpu is no GEMM and permute_indices_weights_kernel holds no token of one.
#include <string>

#include "common/core/kernel_names.h"

namespace us {

namespace {

struct Rule {
    std::string_view token;
    KernelKind kind;
};

// First match wins: the order settles names that hold tokens of two kinds (flash_fprop is attention, not a
// convolution; implicit_gemm is a convolution, not a GEMM; log_softmax is a loss's reduction, not attention).
constexpr Rule kRules[] = {
    // The copy engines' work. CUPTI says "memcpy DtoD", "memset"; Kineto "Memcpy DtoD (Device -> Device)".
    {"_memcpy", KernelKind::memory},
    {"_memset", KernelKind::memory},
    {"_dma_", KernelKind::memory},
    // Collectives in a kernel: NCCL's old (ncclKernel_AllReduce_RING_LL_Sum_float) and new (ncclDevKernel_*,
    // ncclDevKernel_Generic) names, RCCL's (named as NCCL's, or rccl*), MSCCL, NVSHMEM, custom all-reduces.
    {"_nccl", KernelKind::communication},
    {"_rccl", KernelKind::communication},
    {"_msccl", KernelKind::communication},
    {"_nvshmem", KernelKind::communication},
    {"_all_reduce_", KernelKind::communication},
    {"_allreduce", KernelKind::communication},
    {"_all_gather_", KernelKind::communication},
    {"_allgather", KernelKind::communication},
    {"_reduce_scatter_", KernelKind::communication},
    {"_all_to_all_", KernelKind::communication},
    {"_alltoall", KernelKind::communication},
    {"_cross_device_reduce", KernelKind::communication},
    // A loss is a reduction, though it holds a softmax.
    {"_cross_entropy", KernelKind::reduction},
    {"_nll_loss", KernelKind::reduction},
    {"_log_softmax", KernelKind::reduction},
    {"_log_soft_max", KernelKind::reduction},
    // Attention, before the GEMM and convolution tokens its kernels hold (fmha_cutlassF, flash_fprop_wgmma).
    {"_flash", KernelKind::attention},
    {"_fmha", KernelKind::attention},
    {"_mha_", KernelKind::attention},
    {"attention", KernelKind::attention},
    {"_attn", KernelKind::attention},
    {"_sdpa", KernelKind::attention},
    {"_softmax", KernelKind::attention},
    {"_soft_max", KernelKind::attention},
    {"_rope_", KernelKind::attention},
    {"_rotary", KernelKind::attention},
    // Convolutions, before GEMM: cuDNN runs them as implicit GEMMs (sm80_xmma_fprop_implicit_gemm_...,
    // cutlass_tensorop_s1688wgrad_..., ImplicitGemmConvolution) and names its own SASS kernels scudnn.
    {"_conv_", KernelKind::conv},
    {"_convol", KernelKind::conv},
    {"_implicit_gemm", KernelKind::conv},
    {"_fprop_", KernelKind::conv},
    {"_dgrad_", KernelKind::conv},
    {"_wgrad_", KernelKind::conv},
    {"_winograd", KernelKind::conv},
    {"scudnn", KernelKind::conv},
    {"_im_2_col_", KernelKind::conv},
    {"_col_2_im_", KernelKind::conv},
    {"_fft_2_d_", KernelKind::conv},
    // Matrix products: cuBLAS (ampere_sgemm, sm90_xmma_gemm, gemvx, gemmk1, gemv2T, its split-K reduction and
    // cuBLASLt's epilogue), CUTLASS (cutlass_80_tensorop_s1688gemm, its ReduceSplitK), nvjet (cuBLAS on Hopper and
    // Blackwell), Tensile on AMD (Cijk_...), Triton's templates (triton_tem_fused_mm).
    {"_gemm", KernelKind::gemm},
    {"_sgemm", KernelKind::gemm},
    {"_dgemm", KernelKind::gemm},
    {"_hgemm", KernelKind::gemm},
    {"_cgemm", KernelKind::gemm},
    {"_gcgemm", KernelKind::gemm},
    {"_zgemm", KernelKind::gemm},
    {"_igemm", KernelKind::gemm},
    {"_gemv", KernelKind::gemm},
    {"_cutlass", KernelKind::gemm},
    {"_cublas", KernelKind::gemm},
    {"_nvjet", KernelKind::gemm},
    {"_xmma", KernelKind::gemm},
    {"_cijk_", KernelKind::gemm},
    {"_matmul", KernelKind::gemm},
    {"_addmm", KernelKind::gemm},
    {"_bmm_", KernelKind::gemm},
    {"_mm_", KernelKind::gemm},
    {"_split_kreduce_", KernelKind::gemm},
    {"_reduce_split_k_", KernelKind::gemm},
    {"_epilogue_", KernelKind::gemm},
    // Lookups into a table (FBGEMM's split_embedding_*, bounds_check_indices, linearize_index among them).
    {"_emb", KernelKind::embedding},
    {"_index_select", KernelKind::embedding},
    {"_indexing_backward", KernelKind::embedding},
    {"_linearize_index", KernelKind::embedding},
    {"_bounds_check_indices", KernelKind::embedding},
    {"_index_func", KernelKind::embedding},
    {"_index_add_", KernelKind::embedding},
    // Parameter updates; PyTorch's foreach ops (multi_tensor_apply) are the optimizers' work.
    {"_adam", KernelKind::optimizer},
    {"_sgd_", KernelKind::optimizer},
    {"_adagrad", KernelKind::optimizer},
    {"_lamb_", KernelKind::optimizer},
    {"_lion_", KernelKind::optimizer},
    {"_rmsprop", KernelKind::optimizer},
    {"_multi_tensor", KernelKind::optimizer},
    {"_foreach", KernelKind::optimizer},
    {"_optimizer", KernelKind::optimizer},
    // Norms: any word ending in norm (layer_norm, rmsnorm, batchnorm), cuDNN's batch norm (bn_fw_tr_1C11_kernel,
    // bn_bw_1C11_singleread), PyTorch's layer norm moments and gamma/beta gradients.
    {"norm_", KernelKind::norm},
    {"_bn_", KernelKind::norm},
    {"_rowwise_moments", KernelKind::norm},
    {"_gamma_beta", KernelKind::norm},
    {"_welford", KernelKind::norm},
    // Sorting, scans and selections are none of the kinds (CUB's radix sort holds "exclusive_sum"): the launching
    // op says what they serve.
    {"_radix_sort", KernelKind::other},
    {"_sort_", KernelKind::other},
    {"_scan_", KernelKind::other},
    {"_unique", KernelKind::other},
    {"_histogram", KernelKind::other},
    // Reductions, pooling among them; Triton's reduction (red) and persistent-reduction (per) kernels.
    {"_reduce", KernelKind::reduction},
    {"_sum", KernelKind::reduction},
    {"_mean", KernelKind::reduction},
    {"_max_", KernelKind::reduction},
    {"_min_", KernelKind::reduction},
    {"_amax", KernelKind::reduction},
    {"_argmax", KernelKind::reduction},
    {"_argmin", KernelKind::reduction},
    {"_max_pool", KernelKind::reduction},
    {"_avg_pool", KernelKind::reduction},
    {"_average_pool", KernelKind::reduction},
    {"_loss", KernelKind::reduction},
    {"_triton_red_", KernelKind::reduction},
    {"_triton_per_", KernelKind::reduction},
    // Pointwise work: PyTorch's elementwise kernels whatever their functor, activations, arithmetic, copies and
    // fills (data moved by the SMs: cat, transpose, cuDNN's layout transforms nchwToNhwc/nhwcToNchw), casts and
    // quantization, Triton's pointwise kernels (poi).
    {"_elementwise", KernelKind::elementwise},
    {"_vectorized", KernelKind::elementwise},
    {"_unrolled", KernelKind::elementwise},
    {"_copy", KernelKind::elementwise},
    {"_cat_array", KernelKind::elementwise},
    {"_fill", KernelKind::elementwise},
    {"_transpose", KernelKind::elementwise},
    {"_permute", KernelKind::elementwise},
    {"_nchw_to_nhwc", KernelKind::elementwise},
    {"_nhwc_to_nchw", KernelKind::elementwise},
    {"_add_", KernelKind::elementwise},
    {"_mul_", KernelKind::elementwise},
    {"_div_", KernelKind::elementwise},
    {"_sub_", KernelKind::elementwise},
    {"_addcmul", KernelKind::elementwise},
    {"_addcdiv", KernelKind::elementwise},
    {"_scal_", KernelKind::elementwise},
    {"_gelu", KernelKind::elementwise},
    {"_relu", KernelKind::elementwise},
    {"_silu", KernelKind::elementwise},
    {"_swiglu", KernelKind::elementwise},
    {"_glu_", KernelKind::elementwise},
    {"_sigmoid", KernelKind::elementwise},
    {"_tanh", KernelKind::elementwise},
    {"_exp_", KernelKind::elementwise},
    {"_log_", KernelKind::elementwise},
    {"_sqrt", KernelKind::elementwise},
    {"_rsqrt", KernelKind::elementwise},
    {"_pow_", KernelKind::elementwise},
    {"_neg_", KernelKind::elementwise},
    {"_abs_", KernelKind::elementwise},
    {"_clamp", KernelKind::elementwise},
    {"_where_", KernelKind::elementwise},
    {"_dropout", KernelKind::elementwise},
    {"_cast_", KernelKind::elementwise},
    {"_convert", KernelKind::elementwise},
    {"_quantize", KernelKind::elementwise},
    {"_dequantize", KernelKind::elementwise},
    {"_to_float_", KernelKind::elementwise},
    {"_arange", KernelKind::elementwise},
    {"_iota_", KernelKind::elementwise},
    {"_activation", KernelKind::elementwise},
    {"_unary", KernelKind::elementwise},
    {"_binary", KernelKind::elementwise},
    {"_pointwise", KernelKind::elementwise},
    {"_triton_poi_", KernelKind::elementwise},
    // cuDNN's remaining kernels (read on the namespace: cask_cudnn_infer::computeOffsetsKernel) serve its
    // convolutions.
    {"_cudnn_", KernelKind::conv},
    {"_cask_", KernelKind::conv},
};

bool lower_char(char c) { return c >= 'a' && c <= 'z'; }
bool upper_char(char c) { return c >= 'A' && c <= 'Z'; }
bool digit_char(char c) { return c >= '0' && c <= '9'; }

// "_w1_w2_..._": words split at anything not a letter or digit, at a lower-to-upper case step ("nchwTo"), before
// the last capital of a run followed by a lower-case letter ("CUDAKernel": cuda, kernel), and between letters and
// digits ("sm90", "s1688gemm").
std::string words(std::string_view s) {
    std::string out = "_";
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        const bool alnum = lower_char(c) || upper_char(c) || digit_char(c);
        if (!alnum) {
            if (out.back() != '_') out += '_';
            continue;
        }
        if (i > 0 && out.back() != '_') {
            const char p = s[i - 1];
            const bool step = (lower_char(p) && upper_char(c)) || (digit_char(p) != digit_char(c)) ||
                              (upper_char(p) && upper_char(c) && i + 1 < s.size() && lower_char(s[i + 1]));
            if (step) out += '_';
        }
        out += upper_char(c) ? char(c - 'A' + 'a') : c;
    }
    if (out.back() != '_') out += '_';
    return out;
}

// The kind the first matching rule gives, and whether one matched.
bool match_rules(std::string_view text, KernelKind& kind) {
    if (text.empty()) return false;
    const std::string w = words(text);
    for (const Rule& r : kRules)
        if (w.find(r.token) != std::string::npos) {
            kind = r.kind;
            return true;
        }
    return false;
}

}  // namespace

KernelKind kernel_kind(std::string_view full) {
    const KernelNameParts p = kernel_name_parts(full);
    KernelKind kind = KernelKind::other;
    if (match_rules(p.name, kind) || match_rules(p.summary, kind) || match_rules(p.scope, kind)) return kind;
    return KernelKind::other;
}

}  // namespace us
