// The host-staging communicator (the GPU fallback where NCCL cannot run, and the GPU path of pipeline transfers),
// exercised on the CPU backend: every group of the grid wrapped in it, data parallelism with ZeRO-0..3, a
// pipeline, tensor parallelism (with and without sequence parallelism), the context-parallel ring and expert
// parallelism's all-to-alls must still reproduce one rank. Its copies are memcpys here; on a GPU they are the device
// transfers.
#include "engine/comm/staged_comm.h"
#include "mpi_test_util.h"

using namespace us;
using namespace us::test;

namespace {

TrainConfig config(const ParallelLayout& p, int experts) {
    TrainConfig c = small_config(4, 3);
    c.grad_accum = 4;
    c.parallel = p;
    c.parallel.bucket_mb = 0.02;
    c.model.moe_experts = experts, c.model.moe_topk = 2;
    return c;
}

void check(const ParallelLayout& p, int experts = 0) {
    const TrainConfig c = config(p, experts);
    CpuBackend be(1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    int wrapped = 0;
    grid.wrap_groups([&](std::unique_ptr<Communicator> g, GroupKind) {
        ++wrapped;
        return std::make_unique<StagedCommunicator>(std::move(g), be);
    });
    CHECK(wrapped == (p.cp > 1 ? 8 : 7));  // dp, pp, tp, cp, ep, edp, embedding, and the dp x cp group under cp
    Trainer staged(c, be, &grid);
    const std::vector<double> got = train_losses(staged, c.steps);
    CpuBackend one(1);
    Trainer reference(single_rank_twin(c), one);
    const std::vector<double> want = train_losses(reference, c.steps);
    for (size_t s = 0; s < want.size(); ++s) CHECK(got[s] == Approx(want[s]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("host staging: dp 2 with ZeRO 0-3 through the staged communicator reproduces one rank", "[mpi][dp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (int zero : {0, 1, 2, 3}) {
        ParallelLayout p;
        p.dp = 2, p.zero = zero;
        INFO("ZeRO-" << zero);
        check(p);
    }
}

TEST_CASE("host staging: dp 2 x pp 2 with tagged pipeline transfers reproduces one rank", "[mpi][pp4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    ParallelLayout p;
    p.dp = 2, p.pp = 2, p.pp_schedule = PipelineSchedule::one_f_one_b;
    check(p);
}

TEST_CASE("host staging: tp 2, with and without sequence parallelism, reproduces one rank", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (bool sp : {false, true}) {
        ParallelLayout p;
        p.tp = 2, p.sp = sp;
        INFO("sp " << sp);
        check(p);
    }
}

TEST_CASE("host staging: the cp 2 ring, zigzag and contiguous, and the all-gather reproduce one rank", "[mpi][cp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (auto [balance, comm] : {std::pair{"zigzag", "ring"}, {"contiguous", "ring"}, {"zigzag", "allgather"}}) {
        ParallelLayout p;
        p.cp = 2, p.cp_balance = parse_cp_balance(balance), p.cp_comm = parse_cp_comm(comm);
        INFO(balance << ", " << comm);
        check(p);
    }
}

TEST_CASE("host staging: dp 2 x ep 2's all-to-alls reproduce one rank", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    ParallelLayout p;
    p.dp = 2, p.ep = 2;
    check(p, 4);
}
