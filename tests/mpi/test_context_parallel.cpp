// Context parallelism (the ring, and Llama 3's all-gather) against one rank: cp 2 and cp 4, zigzag and contiguous,
// give the loss of every step and, after 5 steps, the weights of the single-rank run of the same global batch (fp32,
// 1e-5 relative; measured about 1e-8). Composition with tp, dp + ZeRO, pp and recomputation; activation bytes per rank
// against the documented breakdown (every per-token tensor / cp, the log-sum-exp instead of the probabilities).
#include "mpi_test_util.h"
#include "profiler/predict/predict.h"

using namespace us;
using namespace us::test;

namespace {

TrainConfig cp_config(int cp, const char* balance, int layers = 2, const char* comm = "ring") {
    TrainConfig c = small_config(layers, 5);
    c.parallel.cp = cp;
    c.parallel.cp_balance = parse_cp_balance(balance);
    c.parallel.cp_comm = parse_cp_comm(comm);
    return c;
}

}  // namespace

TEST_CASE("cp 2, zigzag and contiguous, reproduces one rank", "[mpi][cp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (const char* balance : {"zigzag", "contiguous"})
        for (int accum : {1, 2}) {
            TrainConfig c = cp_config(2, balance);
            c.grad_accum = accum;
            INFO(balance << ", grad-accum " << accum);
            check_against_one_rank(c);
        }
}

TEST_CASE("cp 2 all-gather, zigzag and contiguous, reproduces one rank, and its first loss is the ring's bit for bit",
          "[mpi][cp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (const char* balance : {"zigzag", "contiguous"}) {
        for (int accum : {1, 2}) {
            TrainConfig c = cp_config(2, balance, 2, "allgather");
            c.grad_accum = accum;
            INFO("allgather, " << balance << ", grad-accum " << accum);
            check_against_one_rank(c);
        }
        // Forward merges the gathered blocks in the ring's order: the same online softmax, the same loss. After the
        // first update the key/value gradients differ in summation order (a reduce-scatter, not the ring's chain).
        TrainConfig ring = cp_config(2, balance), gathered = cp_config(2, balance, 2, "allgather");
        ring.steps = gathered.steps = 1;
        INFO(balance);
        CHECK(run_parallel(ring).losses.at(0) == run_parallel(gathered).losses.at(0));
    }
}

TEST_CASE("cp 2 with selective and full recomputation reproduces one rank", "[mpi][cp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (Recompute r : {Recompute::selective, Recompute::full})
        for (const char* comm : {"ring", "allgather"}) {
            TrainConfig c = cp_config(2, "zigzag", 2, comm);
            c.recompute = r;
            INFO("recompute " << recompute_name(r) << ", " << comm);
            check_against_one_rank(c);
        }
}

TEST_CASE("activation bytes per rank under cp follow the documented breakdown", "[mpi][cp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    TrainConfig c = cp_config(2, "zigzag");
    c.steps = 1;
    CpuBackend be(1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    Trainer t(c, be, &grid);
    const ActivationShape& sh = t.model().shape();
    // The rank's T = seq/cp rows; every per-token tensor of the block as without cp, the probabilities replaced by
    // the ring's log-sum-exp (B, NH, T) fp32: e*16*N*C + 16*N + 4*B*NH*T with N = B*seq/cp.
    const int64_t e = 4, N = int64_t(c.batch) * c.model.seq / 2, C = c.model.hidden;
    REQUIRE(sh.T == c.model.seq / 2);
    const int64_t per_layer = e * 16 * N * C + 16 * N + 4 * int64_t(c.batch) * c.model.heads * sh.T;
    CHECK(block_saved_bytes(sh, Recompute::none) == per_layer);
    CHECK(block_saved_bytes(sh, Recompute::selective) == per_layer);  // the ring never keeps probabilities
    t.train_step();
    const predict::Prediction p = predict::predict(predict::PredictInput::from_config(c.to_json()));
    CHECK(p.activations_per_layer == per_layer);
    CHECK(be.allocator().stats().peak_of(MemCategory::activations) == *p.memory[size_t(MemCategory::activations)]);
    // cp joins dp for ZeRO: with ZeRO-1 over the dp x cp group of 2, each rank keeps half the moments
    TrainConfig z = cp_config(2, "zigzag");
    z.parallel.zero = 1;
    z.steps = 1;
    CpuBackend be1(1);
    ProcessGrid grid1(z.parallel, MpiRuntime::world());
    Trainer t1(z, be1, &grid1);
    t1.train_step();
    const predict::Prediction pz = predict::predict(predict::PredictInput::from_config(z.to_json()));
    CHECK(be1.allocator().stats().current_of(MemCategory::optimizer_state) ==
          *pz.memory[size_t(MemCategory::optimizer_state)]);
    CHECK(*pz.memory[size_t(MemCategory::optimizer_state)] == 8 * c.model.num_params() / 2);
}

TEST_CASE("cp 4, zigzag and contiguous, reproduces one rank", "[mpi][cp4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (const char* balance : {"zigzag", "contiguous"})
        for (const char* comm : {"ring", "allgather"}) {
            INFO(balance << ", " << comm);
            check_against_one_rank(cp_config(4, balance, 2, comm));
        }
}

TEST_CASE("cp 2 composes with tp 2, dp 2 with ZeRO-1, and pp 2", "[mpi][cp4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (auto [sp, comm] : {std::pair{false, "ring"}, {true, "ring"}, {true, "allgather"}}) {
        TrainConfig c = cp_config(2, "zigzag", 2, comm);
        c.parallel.tp = 2;
        c.parallel.sp = sp;
        INFO("cp 2 x tp 2, sp " << sp << ", " << comm);
        check_against_one_rank(c);
    }
    for (const char* comm : {"ring", "allgather"}) {
        TrainConfig c = cp_config(2, "zigzag", 2, comm);
        c.parallel.dp = 2;
        c.parallel.zero = 1;
        c.parallel.bucket_mb = 0.01;
        INFO("cp 2 x dp 2, ZeRO-1, " << comm);
        check_against_one_rank(c);
    }
    for (const char* comm : {"ring", "allgather"}) {
        TrainConfig c = cp_config(2, "contiguous", 4, comm);
        c.parallel.pp = 2;
        c.grad_accum = 4;
        INFO("cp 2 x pp 2 (1F1B, 4 micro-batches), " << comm);
        check_against_one_rank(c);
    }
}
