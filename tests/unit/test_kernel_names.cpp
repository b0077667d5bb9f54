// Kernel names made short and classed (common/core/kernel_names.h) against the committed table of every kernel,
// memcpy and memset name in the committed traces (tests/data/kineto/kernel_names.tsv: full name, short name,
// kind), that the table holds every such name of the Kineto and CUPTI traces (tests/tools/list_kernel_names.py
// lists the Kineto ones), and the odd cases: mangled names, lambdas, nesting, garbage.
#include <filesystem>
#include <fstream>
#include <set>

#include "common/core/kernel_names.h"
#include "profiler/analysis/op_table.h"
#include "profiler/import/kineto_names.h"
#include "profiler/import/kineto_parse.h"
#include "profiler/record/kernel_names.h"
#include "test_util.h"

using us::KernelKind;
using us::kernel_kind;
using us::short_kernel_name;

namespace {

const std::string kData = std::string(US_TEST_DATA_DIR);

struct Row {
    std::string name, short_name, kind;
};

// The table's rows ('#' lines are comments).
std::vector<Row> table() {
    std::ifstream in(kData + "/kineto/kernel_names.tsv");
    REQUIRE(in.good());
    std::vector<Row> rows;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const size_t a = line.find('\t'), b = line.find('\t', a + 1);
        REQUIRE(b != std::string::npos);
        rows.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
    }
    return rows;
}

std::string kind_of(std::string_view name) { return std::string(us::kKernelKindNames[int(kernel_kind(name))]); }

// The names of every kernel, memcpy and memset span in the Kineto traces under `dir` (list_kernel_names.py's).
std::set<std::string> kineto_kernel_names(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
        const std::string file = entry.path().filename().string();
        const bool json = file.ends_with(".json") || file.ends_with(".json.gz");
        // Not traces: the folders' settings, the HTA figures, a memory timeline ([times, sizes]).
        if (!entry.is_regular_file() || !json || file == "meta.json" || file == "scenarios.json" ||
            file == "hta_reference.json" || file.starts_with("memory_timeline"))
            continue;
        const us::prof::KinetoFile f = us::prof::parse_kineto_file(entry.path().string());
        for (const us::prof::KinetoSpan& s : f.spans)
            if (us::prof::is_device_cat(s.cat)) names.insert(f.names[s.name]);
    }
    return names;
}

// The names of the op spans on the device lane of every rank of a CUPTI trace.
std::set<std::string> cupti_kernel_names(const std::string& path) {
    us::prof::TraceStore store;
    us::prof::load_trace(path, store);
    std::set<std::string> names;
    for (int r : store.ranks())
        for (const us::prof::Span& s : store.rank(r)->lanes[size_t(us::prof::Lane::device)].spans())
            if (s.kind == us::prof::SpanKind::op) names.insert(store.name(s.name));
    return names;
}

}  // namespace

TEST_CASE("kernel names: every row of the committed table gives its short name and kind", "[cpu][kernel-names]") {
    const std::vector<Row> rows = table();
    CHECK(rows.size() > 400);
    for (const Row& r : rows) {
        INFO(r.name);
        CHECK(short_kernel_name(r.name) == r.short_name);
        CHECK(kind_of(r.name) == r.kind);
    }
}

TEST_CASE("kernel names: the table holds every kernel name of the committed traces", "[cpu][kernel-names]") {
    std::set<std::string> in_table;
    for (const Row& r : table()) in_table.insert(r.name);
    std::set<std::string> names = kineto_kernel_names(kData + "/kineto");
    CHECK(names.size() > 400);
    for (const std::string& file : {kData + "/gpu/small-h100.ustrace", kData + "/gpu/dp2-shared-h100.ustrace",
                                    kData + "/../../docs/images/gpt2-124m-bf16-h100.ustrace"})
        names.merge(cupti_kernel_names(file));
    // A name missing here: add its row (tests/tools/list_kernel_names.py --check lists the Kineto ones).
    for (const std::string& name : names) {
        INFO(name);
        CHECK(in_table.count(name) == 1);
    }
}

TEST_CASE("kernel names: the signatures of PyTorch, cuDNN, CUTLASS and NCCL kernels", "[cpu][kernel-names]") {
    CHECK(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, "
                            "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, "
                            "3> >(int, at::native::BinaryFunctor<float, float, float, "
                            "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)") ==
          "vectorized_elementwise_kernel<MulFunctor>");
    CHECK(short_kernel_name("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
                            "(cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, "
                            "float*)") == "nchwToNhwcKernel");
    CHECK(short_kernel_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>("
                            "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)") ==
          "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4");
    CHECK(short_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
          "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    // A lambda is named by the function it comes from, through the wrappers around it.
    CHECK(short_kernel_name(
              "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::direct_copy_"
              "kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() "
              "const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::"
              "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{lambda("
              "float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_"
              "cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{"
              "lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&"
              ")::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{"
              "lambda(int)#1})") == "elementwise_kernel<direct_copy_kernel_cuda>");
    CHECK(short_kernel_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                            "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
                            "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, "
                            "4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
                            "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda("
                            "float, float)#1}>, unsigned int, float, 4>)") == "reduce_kernel<sum_functor>");
    // Plain names come back as they are.
    for (const char* plain :
         {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "Memcpy DtoD (Device -> Device)",
          "Memset (Device)", "memcpy HtoD", "ampere_sgemm_128x64_tn"})
        CHECK(short_kernel_name(plain) == plain);
    // A generic name keeps the namespace that says whose it is.
    CHECK(short_kernel_name("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
                            "float, float, false, true, true, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched"
                            "<float const>, cublasGemvTensorStridedBatched<float const>, "
                            "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<...>)") ==
          "gemvx::kernel");
    CHECK(short_kernel_name("void epilogue::impl::globalKernel<float, float, float, true, true>(int, int)") ==
          "epilogue::impl::globalKernel");
    CHECK(short_kernel_name("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
                            "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, "
                            "true, false> > > >(flash::FlashAttnFwdSm90<...>::Params)") == "FlashAttnFwdSm90");
}

TEST_CASE("kernel names: mangled names are demangled first", "[cpu][kernel-names]") {
    CHECK(short_kernel_name("_Z11gelu_kernelIfEvPT_PKS0_i") == "gelu_kernel");
    CHECK(short_kernel_name("_ZN2us4cuda24layernorm_forward_kernelIfEEvPT_PKS2_i") == "layernorm_forward_kernel");
    CHECK(kernel_kind("_ZN2us4cuda24layernorm_forward_kernelIfEEvPT_PKS2_i") == KernelKind::norm);
    CHECK(short_kernel_name("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE") ==
          "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    CHECK(short_kernel_name("_ZN12_GLOBAL__N_16kernelEi") == "kernel");  // nothing but anonymous around it
    CHECK(short_kernel_name("_Znot a mangled name") == "_Znot a mangled name");
    // One the demangler refuses (HTA's A100 trace has it, whole, in the table): its source names still say it.
    CHECK(short_kernel_name("_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionI@@@") ==
          "ImplicitGemmConvolution");
    CHECK(kernel_kind("_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionI@@@") ==
          KernelKind::conv);
    CHECK(short_kernel_name("_ZN3999999999999999999999x") == "_ZN3999999999999999999999x");
    CHECK(us::demangle_name("_Z3fooi") == "foo(int)");
    CHECK(us::demangle_name("plain") == "plain");
}

TEST_CASE("kernel names: garbage gives a sensible name and never throws", "[cpu][kernel-names]") {
    CHECK(short_kernel_name("") == "");
    CHECK(short_kernel_name("   ") == "");
    CHECK(kernel_kind("") == KernelKind::other);
    CHECK(short_kernel_name("foo<bar(") == "foo");                       // never closed
    CHECK(short_kernel_name("void foo<int>>>(int))") == "foo");          // closed too often
    CHECK(short_kernel_name("void ns::k<a::b, c::d<e::f>>(x)") == "k");  // types say nothing of the work
    CHECK(short_kernel_name(")))(((") == ")))(((");
    CHECK(short_kernel_name("::") == "::");
    CHECK(short_kernel_name("<<<>>>") == "<<<>>>");
    CHECK(short_kernel_name("void (") == "void (");
    CHECK(short_kernel_name("{lambda()#1}") == "{lambda()#1}");
    // Deep nesting and a very long name: read to a bound, in time.
    std::string deep = "void k<";
    for (int i = 0; i < 5000; ++i) deep += "A<";
    CHECK(short_kernel_name(deep) == "k");
    const std::string long_plain(100000, 'x');
    CHECK(short_kernel_name(long_plain) == long_plain);
    std::string wide = "void wide_kernel<";
    for (int i = 0; i < 2000; ++i) wide.append("F").append(std::to_string(i)).append("Functor<float>, ");
    wide += "int>(int)";
    CHECK(short_kernel_name(wide) == "wide_kernel<F0Functor, F1Functor, F2Functor>");  // three at most
    for (char c = 1; c < 127; ++c) CHECK_NOTHROW(kernel_kind(std::string("void a") + c + "b<" + c + ">(" + c));
}

TEST_CASE("kernel kinds: word edges, the order of the rules, the odd kernels", "[cpu][kernel-names]") {
    struct Case {
        const char* name;
        KernelKind kind;
    };
    const Case cases[] = {
        {"void fbgemm_gpu::permute_indices_weights_kernel<false, int, decltype(nullptr)>(int)",
         KernelKind::elementwise},
        {"void fbgemm_gpu::_offsets_range_cuda_kernel<int>(long, long, int const*, int*)", KernelKind::other},
        {"void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>)",
         KernelKind::gemm},
        {"cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_tn_align4>", KernelKind::gemm},
        {"sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32", KernelKind::conv},
        {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", KernelKind::attention},
        {"void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct)",
         KernelKind::norm},
        {"Memcpy DtoD (Device -> Device)", KernelKind::memory},
        {"memset", KernelKind::memory},
        {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", KernelKind::communication},
        {"ncclDevKernel_Generic", KernelKind::communication},
        {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
         "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
         KernelKind::attention},
        {"void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)",
         KernelKind::reduction},
        {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)",
         KernelKind::norm},
        {"void at::native::(anonymous namespace)::normal_kernel(float*)", KernelKind::other},  // no norm
        {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, "
         "float>, unsigned int, float, 4> >(at::native::ReduceOp<float>)",
         KernelKind::reduction},
        {"us::cuda::(anonymous namespace)::convert_kernel<true, __nv_bfloat16, float>", KernelKind::elementwise},
        {"triton_poi_fused_add_cos_sin_0", KernelKind::elementwise},
        {"triton_red_fused_sum_0", KernelKind::reduction},
        {"void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>(int)",
         KernelKind::optimizer},
        {"void cub::DeviceRadixSortExclusiveSumKernel<cub::DeviceRadixSortPolicy<long, float, int>::Policy800, "
         "int>(int*)",
         KernelKind::other},
        {"void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_infer::ComputeOffsetsParams)",
         KernelKind::conv},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        CHECK(kind_of(c.name) == us::kKernelKindNames[int(c.kind)]);
    }
}

TEST_CASE("kernel names: the op table, the Kineto mapping and CUPTI's classes use them", "[cpu][kernel-names]") {
    using us::prof::OpClass;
    // Kineto's kernels: the fine kind mapped to an op class where one exists; CPU ops as before.
    CHECK(us::prof::compute_class_of("void fbgemm_gpu::permute_indices_weights_kernel<false, int, "
                                     "decltype(nullptr)>(int, int)") == OpClass::activation);
    CHECK(us::prof::compute_class_of("void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, "
                                     "0>(cudnn::bn_bw_1C11_args<float>)") == OpClass::norm);
    CHECK(us::prof::compute_class_of("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4>("
                                     "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4::Params)") == OpClass::gemm);
    CHECK(us::prof::compute_class_of("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32") == OpClass::none);  // conv
    CHECK(us::prof::compute_class_of("Memcpy DtoD (Device -> Device)") == OpClass::none);
    CHECK(us::prof::compute_class_of("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<"
                                     "float, float, long>(float*, float*)") == OpClass::loss);
    CHECK(us::prof::compute_class_of("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                                     "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >("
                                     "at::native::ReduceOp<float>)") == OpClass::none);
    CHECK(us::prof::compute_class_of("aten::mm") == OpClass::gemm);
    // CPU ops: CrossEntropyLoss's log_softmax is the loss's, attention's softmax the attention's; ReLU's own ops
    CHECK(us::prof::compute_class_of("aten::_log_softmax") == OpClass::loss);
    CHECK(us::prof::compute_class_of("aten::_log_softmax_backward_data") == OpClass::loss);
    CHECK(us::prof::compute_class_of("aten::_softmax") == OpClass::attention);
    CHECK(us::prof::compute_class_of("aten::clamp_min") == OpClass::activation);
    CHECK(us::prof::compute_class_of("aten::threshold_backward") == OpClass::activation);
    CHECK(us::prof::compute_class_of("aten::native_layer_norm") == OpClass::norm);
    CHECK(us::prof::compute_class_of("aten::cross_entropy_loss") == OpClass::loss);
    CHECK(us::prof::compute_class_of("Optimizer.step#AdamW.step") == OpClass::optimizer);
    // CUPTI's: GEMMs by the same table, a parameter type no GEMM.
    CHECK(us::prof::classify_kernel("fbgemm_gpu::permute_2D_lengths_kernel<int>").op == OpClass::none);
    CHECK(us::prof::classify_kernel("gemvx::kernel<int, float>").op == OpClass::gemm);
    // The op table's names: kernels short, engine ops as they are, namespaces of CPU ops dropped, cut to a width.
    CHECK(us::prof::short_op_name("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
                                  "(cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, "
                                  "float*)",
                                  44) == "nchwToNhwcKernel");
    CHECK(us::prof::short_op_name("memset", 44, true) == "memset");
    CHECK(us::prof::short_op_name("mlp.c_fc dW", 44) == "mlp.c_fc dW");
    CHECK(us::prof::short_op_name("reduce_from_tp_region (all-reduce)", 44) == "reduce_from_tp_region (all-reduce)");
    CHECK(us::prof::short_op_name("aten::mm", 44) == "mm");
    CHECK(us::prof::fit_op_name("multi_tensor_apply_kernel<BinaryOpScalarFunctor, multiplies>", 44) ==
          "multi_tensor_apply_kernel<BinaryOpScalarF...");
    CHECK(us::prof::fit_op_name("adamw_kernel", 44) == "adamw_kernel");
    CHECK(us::prof::fit_op_name("nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_TNT", 20) == "nvjet_sm90_tss_25...");
}
