// The host-staging communicator (the GPU fallback where NCCL cannot run, and the GPU path of pipeline transfers),
// exercised on the CPU backend: every group of the grid wrapped in it, data parallelism with ZeRO-0..3, a
// pipeline, tensor parallelism (with and without sequence parallelism) and the context-parallel ring must still
// reproduce one rank. Its copies are memcpys here; on a GPU they are the device transfers.
#include "engine/comm/staged_comm.h"
#include "mpi_test_util.h"

using namespace us;
using namespace us::test;

namespace {

TrainConfig config(const ParallelConfig& p) {
    TrainConfig c = small_config(4, 3);
    c.grad_accum = 4;
    c.parallel = p;
    c.parallel.bucket_mb = 0.02;
    return c;
}

void check(const ParallelConfig& p) {
    const TrainConfig c = config(p);
    CpuBackend be(1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    int wrapped = 0;
    grid.wrap_groups([&](std::unique_ptr<Communicator> g, GroupKind) {
        ++wrapped;
        return std::make_unique<StagedCommunicator>(std::move(g), be);
    });
    CHECK(wrapped == (p.cp > 1 ? 6 : 5));  // dp, pp, tp, cp, embedding, and the dp x cp group under cp
    Trainer staged(c, be, &grid);
    const std::vector<double> got = train_losses(staged, c.steps);
    CpuBackend one(1);
    Trainer reference(single_rank_twin(c), one);
    const std::vector<double> want = train_losses(reference, c.steps);
    for (size_t s = 0; s < want.size(); ++s) CHECK(got[s] == Approx(want[s]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("host staging: dp 2 with ZeRO 0-3 through the staged communicator reproduces one rank", "[mpi][dp2]") {
    if (MpiRuntime::world_size() != 2) return;
    for (int zero : {0, 1, 2, 3}) {
        ParallelConfig p;
        p.dp = 2, p.zero = zero;
        INFO("ZeRO-" << zero);
        check(p);
    }
}

TEST_CASE("host staging: dp 2 x pp 2 with tagged pipeline transfers reproduces one rank", "[mpi][pp4]") {
    if (MpiRuntime::world_size() != 4) return;
    ParallelConfig p;
    p.dp = 2, p.pp = 2, p.pp_schedule = "1f1b";
    check(p);
}

TEST_CASE("host staging: tp 2, with and without sequence parallelism, reproduces one rank", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (bool sp : {false, true}) {
        ParallelConfig p;
        p.tp = 2, p.sp = sp;
        INFO("sp " << sp);
        check(p);
    }
}

TEST_CASE("host staging: the cp 2 ring, zigzag and contiguous, reproduces one rank", "[mpi][cp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (const char* balance : {"zigzag", "contiguous"}) {
        ParallelConfig p;
        p.cp = 2, p.cp_balance = balance;
        INFO(balance);
        check(p);
    }
}
