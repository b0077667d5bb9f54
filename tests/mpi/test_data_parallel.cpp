// Multi-rank training against single-rank training of the same global batch: data parallelism with every ZeRO
// stage and gradient accumulation gives the losses of every step and the parameters after 5 steps of one rank
// with a dp-times larger micro-batch (fp32, 1e-5 relative); ZeRO-k against ZeRO-0 at the same dp to 1e-6. Memory
// per category against docs/formulas.md, and bitwise resume from a checkpoint.
#include "mpi_test_util.h"
#include "profiler/predict/predict.h"

using namespace us;
using namespace us::test;

namespace {

int world_size() { return MpiRuntime::world_size(); }

TrainConfig base_config(int steps) { return small_config(2, steps); }

struct RunResult {
    std::vector<double> losses;
    std::vector<float> params;  // every tensor, gathered, fp32 (master weights in bf16 runs)
};

RunResult gather_params(Trainer& t, RunResult r) {
    for (const ParamTensor& p : t.layout().tensors()) {
        std::vector<float> v(size_t(p.numel));
        t.state().export_tensor(p, StateSlot::weights, v.data());
        r.params.insert(r.params.end(), v.begin(), v.end());
    }
    return r;
}

RunResult run_distributed(const TrainConfig& c) {
    CpuBackend be(1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    Trainer t(c, be, &grid);
    RunResult r;
    r.losses = train_losses(t, c.steps);
    return gather_params(t, r);
}

RunResult run_single(const TrainConfig& parallel) {
    const TrainConfig c = single_rank_twin(parallel);
    CpuBackend be(1);
    Trainer t(c, be);
    RunResult r;
    r.losses = train_losses(t, c.steps);
    return gather_params(t, r);
}

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(double(a[i]) - b[i]));
        scale = std::max(scale, std::abs(double(b[i])));
    }
    return diff / scale;
}

void check_equivalence(int dp) {
    REQUIRE(world_size() == dp);
    for (int accum : {1, 2}) {
        RunResult zero0;
        for (int zero : {0, 1, 2, 3}) {
            TrainConfig c = base_config(5);
            c.parallel.dp = dp;
            c.parallel.zero = zero;
            c.parallel.bucket_mb = 0.02;  // several buckets: overlap, sharding and prefetch all exercised
            c.grad_accum = accum;
            const RunResult dist = run_distributed(c);
            const RunResult single = run_single(c);
            INFO("dp " << dp << " ZeRO-" << zero << " grad-accum " << accum);
            REQUIRE(dist.losses.size() == single.losses.size());
            for (size_t s = 0; s < dist.losses.size(); ++s)
                CHECK(dist.losses[s] == Approx(single.losses[s]).epsilon(1e-5));
            CHECK(max_relative(dist.params, single.params) < 1e-5);
            if (zero == 0)
                zero0 = dist;
            else {
                for (size_t s = 0; s < dist.losses.size(); ++s)
                    CHECK(dist.losses[s] == Approx(zero0.losses[s]).epsilon(1e-6));
                CHECK(max_relative(dist.params, zero0.params) < 1e-6);
            }
        }
    }
}

// When the buckets are reduced changes the timing only: after backward (--no-overlap), or overlapped in every other
// step (--overlap-alternate, calibration's), the same losses and weights.
void check_reduce_timing() {
    REQUIRE(world_size() == 2);
    for (const bool alternate : {false, true}) {
        TrainConfig c = base_config(5);
        c.parallel.dp = 2;
        c.parallel.bucket_mb = 0.02;
        c.parallel.overlap = alternate;
        c.runtime.overlap_alternate = alternate;
        const RunResult dist = run_distributed(c), single = run_single(c);
        INFO(std::string(alternate ? "--overlap-alternate" : "--no-overlap"));
        REQUIRE(dist.losses.size() == single.losses.size());
        for (size_t s = 0; s < dist.losses.size(); ++s) CHECK(dist.losses[s] == Approx(single.losses[s]).epsilon(1e-5));
        CHECK(max_relative(dist.params, single.params) < 1e-5);
    }
}

}  // namespace

TEST_CASE("dp 2 reducing after backward, or overlapping every other step, reproduces one rank", "[mpi][dp2]") {
    check_reduce_timing();
}
TEST_CASE("dp 2 with ZeRO 0-3 and gradient accumulation reproduces one rank", "[mpi][dp2]") { check_equivalence(2); }
TEST_CASE("dp 4 with ZeRO 0-3 and gradient accumulation reproduces one rank", "[mpi][dp4]") { check_equivalence(4); }

// Losses of every step and the weights after 5 steps, within bf16's own rounding noise (check_bf16_trajectory in
// mpi_test_util.h says how that is measured and why).
TEST_CASE("bf16 data parallelism follows the single-rank bf16 run", "[mpi][dp2][dp4]") {
    const int dp = world_size();
    REQUIRE((dp == 2 || dp == 4));
    for (int zero : {0, 3}) {
        TrainConfig c = base_config(5);
        c.parallel.dp = dp;
        c.parallel.zero = zero;
        c.precision = Precision::bf16;
        TrainConfig fp32 = single_rank_twin(c);
        fp32.precision = Precision::fp32;
        Bf16Trajectories r;
        {
            CpuBackend be(1);
            ProcessGrid grid(c.parallel, MpiRuntime::world());
            Trainer t(c, be, &grid);
            r.losses = train_losses(t, c.steps);
            r.weights = export_weights(t);
        }
        for (const TrainConfig& single : {single_rank_twin(c), fp32}) {
            CpuBackend be(1);
            Trainer t(single, be);
            const std::vector<double> losses = train_losses(t, single.steps);
            if (single.precision == Precision::bf16)
                r.single_losses = losses, r.single_bf16 = export_weights(t);
            else
                r.single_fp32 = export_weights(t);
        }
        INFO("dp " << dp << " ZeRO-" << zero);
        check_bf16_trajectory({ParamLayout::whole_model(c.model)}, r);
    }
}

TEST_CASE("memory per rank per category equals docs/formulas.md under ZeRO", "[mpi][dp2][dp4]") {
    const int dp = world_size();
    for (Precision p : {Precision::fp32, Precision::bf16})
        for (int zero : {0, 1, 2, 3}) {
            TrainConfig c = base_config(1);
            c.parallel.dp = dp;
            c.parallel.zero = zero;
            c.precision = p;
            CpuBackend be(1);
            ProcessGrid grid(c.parallel, MpiRuntime::world());
            Trainer t(c, be, &grid);
            t.train_step();
            const MemoryStats m = be.allocator().stats();
            const predict::Prediction pred = predict::predict(predict::PredictInput::from_config(c.to_json()));
            INFO("dp " << dp << " ZeRO-" << zero << " " << precision_name(p));
            for (MemCategory cat :
                 {MemCategory::params, MemCategory::grads, MemCategory::master_params, MemCategory::optimizer_state}) {
                INFO(mem_category_name(cat));
                CHECK(m.current_of(cat) == *pred.memory[size_t(cat)]);
            }
            CHECK(m.peak_of(MemCategory::activations) == *pred.memory[size_t(MemCategory::activations)]);
        }
}

TEST_CASE("resuming a sharded run from a checkpoint gives bitwise the same losses", "[mpi][dp2][dp4]") {
    const int dp = world_size();
    for (int zero : {0, 2, 3}) {
        TrainConfig c = base_config(6);
        c.parallel.dp = dp;
        c.parallel.zero = zero;
        c.parallel.bucket_mb = 0.02;
        const RunResult whole = run_distributed(c);
        const std::string path = rank0_temp_path("resume-zero" + std::to_string(zero) + ".safetensors");
        const std::vector<double> resumed = losses_across_resume(c, path, 3);
        INFO("ZeRO-" << zero);
        for (size_t s = 0; s < whole.losses.size(); ++s) CHECK(resumed[s] == whole.losses[s]);
    }
}
