// --attention cudnn (engine/backend/cuda/cudnn_attention.h). Without a GPU: the strides that read q, k, v in qkv,
// the shapes it refuses, the loader's message for a missing library, and whether cuDNN's own heuristics find an
// engine for our forward and backward graphs on an H100 described in JSON (deviceless planning, cuDNN >= 9.8).
// With a GPU ([cuda], skipped without one): cuDNN's out, lse and dq/dk/dv against the flash tile kernels, the
// backward's repeatability, and five training steps against --attention flash.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "../unit/test_util.h"
#include "common/settings/config.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cudnn_sdpa_layout.h"
#include "engine/train/trainer.h"

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include "engine/backend/cuda/cudnn_graph.h"
#include "engine/backend/cuda/cudnn_loader.h"
#include "engine/backend/cuda/cudnn_sdpa_graph.h"
#endif

using namespace us;
using namespace us::test;

namespace {

int64_t element(const cuda::SdpaTensorLayout& l, int64_t b, int64_t h, int64_t i, int64_t j) {
    return l.offset + b * l.strides[0] + h * l.strides[1] + i * l.strides[2] + j * l.strides[3];
}

}  // namespace

TEST_CASE("cudnn attention: strides read q, k, v in qkv and write out and lse in place", "[cudnn]") {
    const int B = 2, T = 5, NH = 3, HD = 8, C = NH * HD;
    const cuda::SdpaLayout l = cuda::sdpa_layout(B, T, NH, HD);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
            for (int t = 0; t < T; ++t)
                for (int d = 0; d < HD; ++d) {
                    const int64_t row = (int64_t(b) * T + t) * 3 * C + h * HD + d;  // qkv (B, T, 3C)
                    REQUIRE(element(l.q, b, h, t, d) == row);
                    REQUIRE(element(l.k, b, h, t, d) == row + C);
                    REQUIRE(element(l.v, b, h, t, d) == row + 2 * C);
                    REQUIRE(element(l.k_t, b, h, d, t) == row + C);  // kᵀ: the same element, indices swapped
                    REQUIRE(element(l.v_t, b, h, d, t) == row + 2 * C);
                    REQUIRE(element(l.o, b, h, t, d) == (int64_t(b) * T + t) * C + h * HD + d);  // out (B, T, C)
                }
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h)
            for (int t = 0; t < T; ++t) REQUIRE(element(l.stats, b, h, t, 0) == (int64_t(b) * NH + h) * T + t);
    CHECK(l.q.dims == std::array<int64_t, 4>{B, NH, T, HD});
    CHECK(l.k_t.dims == std::array<int64_t, 4>{B, NH, HD, T});
}

TEST_CASE("cudnn attention: shapes it cannot take say why", "[cudnn]") {
    CHECK(cuda::sdpa_unsupported(DType::bf16, 8, 1024, 12, 64, true).empty());
    CHECK(cuda::sdpa_unsupported(DType::bf16, 1, 7, 1, 128, true).empty());
    CHECK_THAT(cuda::sdpa_unsupported(DType::f32, 8, 1024, 12, 64, true), Catch::Contains("bf16"));
    CHECK_THAT(cuda::sdpa_unsupported(DType::bf16, 8, 1024, 12, 60, true), Catch::Contains("head dim 60"));
    CHECK_THAT(cuda::sdpa_unsupported(DType::bf16, 8, 1024, 2, 256, true), Catch::Contains("head dim 256"));
    CHECK_THAT(cuda::sdpa_unsupported(DType::bf16, 8, 1024, 12, 64, false), Catch::Contains("aligned"));
    CHECK_THAT(cuda::sdpa_unsupported(DType::bf16, 0, 1024, 12, 64, true), Catch::Contains("empty"));
}

TEST_CASE("cudnn attention: --attention cudnn is refused on the CPU, in fp32 and with context parallelism", "[cudnn]") {
    TrainConfig c;
    c.attention = Attention::cudnn, c.precision = Precision::bf16;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--device cuda"));
    c.device = "cuda";
    CHECK_NOTHROW(c.validate());
    c.precision = Precision::fp32;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--precision bf16"));
    c.precision = Precision::bf16, c.parallel.cp = 2;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--cp 2") && Catch::Contains("--attention flash"));
    CHECK(parse_attention("cudnn") == Attention::cudnn);
    CHECK(attention_name(Attention::cudnn) == "cudnn");
    CHECK(attention_blockwise(Attention::cudnn));
    CHECK_FALSE(attention_blockwise(Attention::naive));
}

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
namespace {
// Where cuDNN 9 may be: the loader's search path first, then the CUDA toolkit's folder.
std::string find_cudnn() {
    for (const char* name : {"libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9"})
        if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
            dlclose(h);
            return name;
        }
    return {};
}
}  // namespace

TEST_CASE("cudnn attention: a missing library is refused with its name and what to do", "[cudnn]") {
    CHECK_THROWS_WITH(cuda::load_cudnn("libcudnn_not_here.so.9"), Catch::Contains("libcudnn_not_here.so.9") &&
                                                                      Catch::Contains("LD_LIBRARY_PATH") &&
                                                                      Catch::Contains("--attention flash"));
    CHECK_THROWS_AS(cuda::load_cudnn("libcudnn_not_here.so.9"), UserError);
}

TEST_CASE("cudnn attention: cuDNN's heuristics take our forward and backward graphs for an H100 (deviceless)",
          "[cudnn]") {
    const std::string library = find_cudnn();
    if (library.empty()) return skip_test("no libcudnn.so.9 on the search path or in /usr/local/cuda/lib64");
    const cuda::CudnnApi api = cuda::load_cudnn(library);
    if (api.version < 90800) return skip_test("cuDNN " + api.version_text() + " plans for a device only from 9.8");
    // cuDNN's engines ask for the driver's library even to plan; without a GPU the toolkit's stub answers (it
    // loads nothing, so a plan gets as far as loading its kernel, which is what this checks).
    if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) &&
        !dlopen("/usr/local/cuda/lib64/stubs/libcuda.so", RTLD_NOW | RTLD_GLOBAL))
        return skip_test("no libcuda.so.1 and no CUDA toolkit stub for cuDNN's planning");
    // An H100 SXM as cuDNN's device description (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION), from its datasheet.
    const std::string h100 =
        R"({"maxGridSize":[2147483647,65535,65535],"maxBlockSize":[1024,1024,64],"regsPerBlock":65536,)"
        R"("multiProcessorCount":132,"warpSize":32,"maxSharedMemoryPerBlock":49152,)"
        R"("maxSharedMemoryPerBlockOptin":232448,"reservedSharedMemoryPerBlock":1024,"maxRegistersPerSM":65536,)"
        R"("maxCtasPerSM":32,"maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,"pciDeviceId":0,"isTccDriver":0,)"
        R"("supportCoopLaunch":1,"totalGlobalMem":85520809984,"smClockRateKHz":1980000,"memClockRateKHz":2619000,)"
        R"("l2CacheSize":52428800,"cudaDeviceId":0,"deviceVer":900,"driverVer":13000,)"
        R"("deviceName":"NVIDIA H100 80GB HBM3"})";
    const cuda::SdpaShape gpt2{8, 1024, 12, 64};
    for (int which = 0; which < 3; ++which) {
        const char* what = which == 0 ? "forward" : which == 1 ? "backward, deterministic" : "backward, atomics";
        INFO(what);
        cuda::CudnnGraph g(api, h100);
        if (which == 0)
            cuda::sdpa_forward_graph(g, gpt2);
        else
            cuda::sdpa_backward_graph(g, gpt2, which == 1);
        std::string engine, failure;
        int64_t workspace = 0;
        try {
            g.build_plan(which == 1, &engine, &workspace);  // a real driver: the plan itself
        } catch (const cuda::CudnnFailure& e) {
            failure = e.what();
        }
        INFO("cuDNN " << api.version_text() << ": " << (failure.empty() ? engine : failure));
        // Either a plan, or an engine that accepted the graph and failed only to load its compiled kernel.
        CHECK((failure.empty() || failure.find("CUDA_DRIVER") != std::string::npos));
        CHECK(failure.find("offered no engine; heuristics mode 2 offered no engine") == std::string::npos);
    }
}
#endif

// ---- on a GPU

namespace {

bool have_gpu_and_cudnn(std::unique_ptr<Backend>* cudnn_backend) {
    std::string why;
    if (!cuda_device_available(&why)) {
        skip_test("[cuda] needs a GPU: " + why);
        return false;
    }
    try {
        *cudnn_backend = make_cuda_backend(BackendOptions{"cuda", 0, 0, true});
    } catch (const UserError& e) {
        skip_test(std::string("[cuda] cuDNN attention: ") + e.what());
        return false;
    }
    return true;
}

Tensor upload(Backend& be, Allocation& a, DType t, const std::vector<float>& values) {
    a = be.allocator().allocate(values.size() * dtype_size(t), MemCategory::temporaries, "test");
    Tensor x = a.view(t, 0, int64_t(values.size()));
    std::vector<bf16> b16(values.size());
    if (t == DType::bf16) {
        for (size_t i = 0; i < values.size(); ++i) b16[i] = f32_to_bf16(values[i]);
        be.upload(x, b16.data());
    } else {
        be.upload(x, values.data());
    }
    return x;
}

std::vector<float> download(Backend& be, Tensor x) {
    std::vector<char> bytes(x.bytes());
    be.download(bytes.data(), x);
    const Tensor h = Tensor::of(bytes.data(), x.dtype, x.numel);
    std::vector<float> v(size_t(x.numel));
    for (int64_t i = 0; i < x.numel; ++i) v[size_t(i)] = x.dtype == DType::bf16 ? bf16_to_f32(h.b16()[i]) : h.f32()[i];
    return v;
}

// The largest difference over the reference's largest magnitude.
double relative_to_max(const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0, scale = 1e-12;
    for (float w : want) scale = std::max(scale, double(std::abs(w)));
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    return worst / scale;
}

}  // namespace

TEST_CASE("cuda: cuDNN fused attention equals the flash tiles (out, lse, dq dk dv) and repeats its backward",
          "[cuda]") {
    std::unique_ptr<Backend> cudnn;
    if (!have_gpu_and_cudnn(&cudnn)) return;
    auto tiles = make_cuda_backend(BackendOptions{"cuda", 0, 0});
    const std::vector<AttentionChunkPair> pairs = {{0, 0, true}};
    struct Shape {
        int B, T, NH;
    };
    for (Shape s : {Shape{2, 128, 4}, Shape{2, 256, 4}, Shape{4, 1024, 12}}) {
        const int HD = 64, C = s.NH * HD;
        INFO("B " << s.B << " T " << s.T << " heads " << s.NH);
        const int64_t values = int64_t(s.B) * s.T * C, rows = int64_t(s.B) * s.NH * s.T;
        const std::vector<float> qkv_v = random_vector(size_t(3 * values), 90),
                                 dout_v = random_vector(size_t(values), 91);
        std::vector<float> results[2][4];  // [cudnn, tiles][out, lse, dqkv, dqkv again]
        for (int side = 0; side < 2; ++side) {
            Backend& be = side == 0 ? *cudnn : *tiles;
            Allocation m[6];
            Tensor qkv = upload(be, m[0], DType::bf16, qkv_v), dout = upload(be, m[1], DType::bf16, dout_v);
            Tensor out = upload(be, m[2], DType::bf16, std::vector<float>(size_t(values)));
            Tensor lse = upload(be, m[3], DType::f32, std::vector<float>(size_t(rows)));
            Tensor dqkv = upload(be, m[4], DType::bf16, std::vector<float>(size_t(3 * values)));
            const AttentionBlockArgs a{qkv,  qkv.slice(C, qkv.numel - C), s.B, s.T, s.NH, HD, s.T, pairs.data(), 1,
                                       3 * C};
            REQUIRE(be.fuses_whole_attention(a));
            be.attention_whole_forward(a, out, lse);
            be.attention_whole_backward(a, dqkv, dout, out, lse);
            results[side][0] = download(be, out), results[side][1] = download(be, lse);
            results[side][2] = download(be, dqkv);
            be.attention_whole_backward(a, dqkv, dout, out, lse);
            results[side][3] = download(be, dqkv);
        }
        const double out_err = relative_to_max(results[0][0], results[1][0]);
        const double lse_err = relative_to_max(results[0][1], results[1][1]);
        const double grad_err = relative_to_max(results[0][2], results[1][2]);
        INFO("cuDNN against the tiles: out " << out_err << ", lse " << lse_err << ", dqkv " << grad_err);
        CHECK(out_err < 2e-2);
        CHECK(lse_err < 1e-3);  // both fp32 log-sum-exps of the same bf16 scores: the same convention
        CHECK(grad_err < 3e-2);
        CHECK(results[0][2] == results[0][3]);  // the deterministic backward repeats bitwise
    }
}

TEST_CASE("cuda: five training steps with --attention cudnn follow --attention flash", "[cuda]") {
    std::unique_ptr<Backend> cudnn;
    if (!have_gpu_and_cudnn(&cudnn)) return;
    auto tiles = make_cuda_backend(BackendOptions{"cuda", 0, 0});
    TrainConfig c;
    c.device = "cuda", c.precision = Precision::bf16;
    c.model.vocab = 256, c.model.hidden = 128, c.model.layers = 2, c.model.heads = 2, c.model.seq = 128;
    c.batch = 4, c.grad_accum = 1, c.steps = 5, c.warmup = 1, c.quiet = true;
    c.data = sample_data_file("cudnn-data.txt", 40000);
    TrainConfig flash = c;
    c.attention = Attention::cudnn, flash.attention = Attention::flash;
    Trainer with_cudnn(c, *cudnn), with_tiles(flash, *tiles);
    for (int s = 0; s < c.steps; ++s) {
        const double want = with_tiles.train_step().loss, got = with_cudnn.train_step().loss;
        INFO("step " << s + 1 << ": flash " << want << ", cudnn " << got);
        CHECK(got == Approx(want).epsilon(1e-2));
    }
}
