// Helpers shared by the [mpi] tests: a small model over sample text, its single-rank twin, a path every rank
// agrees on, and a run interrupted by a checkpoint.
#pragma once

#include <mpi.h>

#include <algorithm>
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
    c.parallel = ParallelConfig{};
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

}  // namespace us::test
