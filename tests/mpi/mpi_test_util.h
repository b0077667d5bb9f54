// Helpers shared by the [mpi] tests: a small model over sample text, its single-rank twin, a path every rank
// agrees on, and a run interrupted by a checkpoint.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "../unit/test_util.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/comm/mpi_comm.h"
#include "engine/parallel/grid.h"
#include "engine/train/trainer.h"

namespace us::test {

// A GPT small enough for every layout on two cores. Every rank writes the same bytes to its own file: no file
// system race.
inline TrainConfig small_config(int layers, int steps) {
    TrainConfig c;
    c.model.vocab = 256, c.model.hidden = 32, c.model.layers = layers, c.model.heads = 4, c.model.seq = 16;
    c.batch = 2;
    c.steps = steps;
    c.warmup = 1;
    c.adamw.lr = 2e-3;
    c.threads = 1;
    c.quiet = true;
    c.data = sample_data_file("mpi-data.txt", 80000);
    return c;
}

// The same global batch on one rank: micro-batch dp x B.
inline TrainConfig single_rank_twin(TrainConfig c) {
    c.batch *= c.parallel.dp;
    c.parallel = ParallelLayout{};
    return c;
}

inline std::vector<double> train_losses(Trainer& t, int steps) {
    std::vector<double> out;
    while (t.steps_done() < steps) out.push_back(t.train_step().loss);
    return out;
}

// Rank 0's temporary path for `name`, on every rank: temporary directories are per process, and a checkpoint is
// read from where rank 0 wrote it.
inline std::string rank0_temp_path(const std::string& name) {
    const std::string own = temp_path(name);
    std::vector<char> shared(512, 0);
    if (MpiRuntime::world_rank() == 0) std::copy(own.begin(), own.end(), shared.begin());
    MPI_Bcast(shared.data(), int(shared.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    return shared.data();
}

// The losses of c.steps steps trained as `first_steps` steps, a checkpoint saved to `path`, and the rest resumed
// from it by a fresh trainer.
inline std::vector<double> losses_across_resume(const TrainConfig& c, const std::string& path, int first_steps) {
    std::vector<double> losses;
    {
        CpuBackend be(1);
        ProcessGrid grid(c.parallel, MpiRuntime::world());
        Trainer t(c, be, &grid);
        losses = train_losses(t, first_steps);
        t.save(path);
    }
    TrainConfig again = c;
    again.load = path;
    CpuBackend be(1);
    ProcessGrid grid(again.parallel, MpiRuntime::world());
    Trainer t(again, be, &grid);
    REQUIRE(t.steps_done() == first_steps);
    const std::vector<double> rest = train_losses(t, c.steps);
    losses.insert(losses.end(), rest.begin(), rest.end());
    return losses;
}

using TensorMap = std::map<std::string, std::vector<float>>;
inline double l2_relative(const std::vector<ParamLayout>& layouts, const TensorMap& shards, const TensorMap& whole);

struct Result {
    std::vector<double> losses;
    std::map<std::string, std::vector<float>> tensors;  // this rank's shard of each tensor (the whole on one rank)
};

inline Result collect(Trainer& t, int steps) {
    Result r;
    r.losses = train_losses(t, steps);
    for (const ParamLayout* layout : {&t.layout(), &t.expert_layout()})
        for (const ParamTensor& p : layout->tensors()) {
            std::vector<float> v(size_t(p.numel));
            t.state().export_tensor(p, StateSlot::weights, v.data());
            r.tensors[p.name] = std::move(v);
        }
    return r;
}

// The layouts of the rank at `at`: its blocks and, for a mixture of experts, its experts.
inline std::vector<ParamLayout> rank_layouts(const TrainConfig& c, const GridCoords& at) {
    std::vector<ParamLayout> out{Trainer::rank_layout(c, at.pp, at.tp)};
    if (c.model.moe_experts > 0)
        out.push_back(ParamLayout::build_experts(c.model, Trainer::stage_chunks(c, at.pp),
                                                 TpPlacement{c.parallel.tp, at.tp}, EpPlacement{c.parallel.ep, at.ep}));
    return out;
}

inline Result run_parallel(const TrainConfig& c) {
    CpuBackend be(1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    Trainer t(c, be, &grid);
    return collect(t, c.steps);
}

inline Result run_single(const TrainConfig& parallel) {
    const TrainConfig c = single_rank_twin(parallel);
    CpuBackend be(1);
    Trainer t(c, be);
    return collect(t, c.steps);
}

// The largest difference between a rank's shards and the same shards cut from the single-rank run's whole
// tensors, relative to the largest weight (a max-norm over all tensors: per-tensor measures are dominated by the
// attention k-bias, whose gradient is zero up to rounding).
inline double shard_difference(const Result& got, const Result& whole, const std::vector<ParamLayout>& layouts,
                               std::string* worst = nullptr) {
    double diff = 0, scale = 0;
    for (const ParamLayout& layout : layouts)
        for (const ParamTensor& t : layout.tensors()) {
            std::vector<float> want(size_t(t.numel));
            take_shard(t, layout.tp(), whole.tensors.at(t.name).data(), want.data());
            const std::vector<float>& v = got.tensors.at(t.name);
            REQUIRE(v.size() == want.size());
            for (size_t i = 0; i < v.size(); ++i) {
                const double d = std::abs(double(v[i]) - want[i]);
                if (d > diff && worst) *worst = t.name;
                diff = std::max(diff, d);
                scale = std::max(scale, std::abs(double(want[i])));
            }
        }
    return diff / scale;
}

// The run of c on the world's ranks against one rank of the same global batch: the loss of every step to
// `tolerance` relative, and every rank's shard of every tensor after the steps to `tolerance` relative in L2 norm,
// no element further than 10x that from the single rank's (relative to the largest weight). Why two norms: a
// layout that splits a sum over tokens (dp, cp, tp's partial products) changes the last bits of every gradient, and
// Adam divides each update by sqrt(v), so an element whose gradient is near zero can move by many times its
// gradient's rounding; measured, the L2 difference is 1e-8..1e-6 and the worst element 2e-7..1.4e-5.
inline void check_against_one_rank(const TrainConfig& c, double tolerance = 1e-5) {
    const Result got = run_parallel(c);
    const Result want = run_single(c);
    REQUIRE(got.losses.size() == want.losses.size());
    for (size_t s = 0; s < got.losses.size(); ++s) CHECK(got.losses[s] == Approx(want.losses[s]).epsilon(tolerance));
    const std::vector<ParamLayout> layouts = rank_layouts(c, grid_coords(c.parallel, MpiRuntime::world_rank()));
    std::string worst;
    const double diff = shard_difference(got, want, layouts, &worst);
    const double l2 = l2_relative(layouts, got.tensors, want.tensors);
    INFO("weights: L2 difference " << l2 << ", largest element difference " << diff << " in " << worst);
    CHECK(l2 < tolerance);
    CHECK(diff < 10 * tolerance);
}

// Every tensor of the rank's layout as it holds it (its shard under tensor parallelism), fp32.
inline TensorMap export_weights(Trainer& t) {
    TensorMap out;
    for (const ParamTensor& p : t.layout().tensors()) {
        std::vector<float> v(size_t(p.numel));
        t.state().export_tensor(p, StateSlot::weights, v.data());
        out[p.name] = std::move(v);
    }
    return out;
}

// The L2 distance between a rank's tensors (`shards`, laid out as `layout`) and the same shards cut from a single
// rank's whole tensors, relative to the L2 norm of the latter.
inline double l2_relative(const std::vector<ParamLayout>& layouts, const TensorMap& shards, const TensorMap& whole) {
    double diff = 0, norm = 0;
    std::vector<float> want;
    for (const ParamLayout& layout : layouts)
        for (const ParamTensor& t : layout.tensors()) {
            want.resize(size_t(t.numel));
            take_shard(t, layout.tp(), whole.at(t.name).data(), want.data());
            const std::vector<float>& got = shards.at(t.name);
            for (size_t i = 0; i < want.size(); ++i) {
                diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
                norm += double(want[i]) * want[i];
            }
        }
    return std::sqrt(diff / norm);
}

// bf16 runs: any change in the order of bf16 roundings (a bf16 all-reduce of partial sums where one rank rounds
// once after its GEMM) perturbs the trajectory by about as much as bf16 rounding itself does. That noise level is
// measured as the distance between the single-rank bf16 and fp32 runs; a parallel bf16 run must stay within 1.5x
// of it from the single-rank bf16 run (a missing reduction, e.g. sequence parallelism's LayerNorm gradients, gives
// 3x), and its losses within 1e-4 relative (rounding moves them by about 3e-5, that bug by 5e-4).
struct Bf16Trajectories {
    std::vector<double> losses;  // the parallel run's
    TensorMap weights;           // the parallel run's shards
    std::vector<double> single_losses;
    TensorMap single_bf16, single_fp32;  // whole tensors
};
inline void check_bf16_trajectory(const std::vector<ParamLayout>& layouts, const Bf16Trajectories& r) {
    const double parallel = l2_relative(layouts, r.weights, r.single_bf16);
    double d = 0, n = 0;  // the noise level: single-rank fp32 against single-rank bf16, whole tensors
    for (const auto& [name, w16] : r.single_bf16) {
        const std::vector<float>& w32 = r.single_fp32.at(name);
        for (size_t i = 0; i < w16.size(); ++i) {
            d += (double(w32[i]) - w16[i]) * (double(w32[i]) - w16[i]);
            n += double(w16[i]) * w16[i];
        }
    }
    const double noise = std::sqrt(d / n);
    INFO("L2 distance from the single-rank bf16 run: " << parallel << "; bf16 against fp32 on one rank: " << noise);
    CHECK(parallel < 1.5 * noise);
    REQUIRE(r.losses.size() == r.single_losses.size());
    for (size_t s = 0; s < r.losses.size(); ++s) CHECK(r.losses[s] == Approx(r.single_losses[s]).epsilon(1e-4));
}

}  // namespace us::test
