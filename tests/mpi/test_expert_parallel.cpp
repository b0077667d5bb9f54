// Mixture of experts and expert parallelism against one rank: an MoE model under dp, with its experts spread over
// ep ranks carved out of dp, gives the loss of every step and, after 5 steps, every rank's experts and blocks of
// the single-rank run of the same global batch (fp32, 1e-5 relative). With the balance loss on, ZeRO over the
// blocks' and the experts' groups, tp (and sp), pp, cp and recomputation; bf16 within its rounding noise. Capacity:
// every micro-batch is planned on the rank that holds its tokens, so a dp x ep run drops exactly what one rank running
// the same micro-batches one after another (gradient accumulation) drops. A rank holds E/ep experts of every MoE block.
#include "mpi_test_util.h"

using namespace us;
using namespace us::test;

namespace {

// Two blocks, both MoE: 4 experts, top-2, the Switch balance loss at a weight that shows in the gradients.
TrainConfig moe_config(int dp, int ep, int steps = 5) {
    TrainConfig c = small_config(2, steps);
    c.model.moe_experts = 4, c.model.moe_topk = 2, c.model.moe_every = 1;
    c.moe_aux_loss_coef = 0.05;
    c.parallel.dp = dp;
    c.parallel.ep = ep;
    return c;
}

// The same micro-batches on one rank one after another: dp x accum micro-batches of the parallel run's size.
// The data loader hands dp rank r of micro-batch m the sequences one rank reads as micro-batch m dp + r, so each
// micro-batch, and what its experts' capacity drops, is the same.
TrainConfig accumulating_twin(TrainConfig c) {
    c.grad_accum *= c.parallel.dp * c.parallel.cp;
    c.parallel = ParallelLayout{};
    return c;
}

struct MoeRun {
    Result result;
    std::vector<int64_t> dropped;  // per step
    std::vector<double> aux;
};

MoeRun run_moe(const TrainConfig& c, ProcessGrid* grid) {
    CpuBackend be(1);
    Trainer t(c, be, grid);
    MoeRun r;
    while (t.steps_done() < c.steps) {
        const StepMetrics m = t.train_step();
        r.result.losses.push_back(m.loss);
        r.dropped.push_back(m.moe_dropped);
        r.aux.push_back(m.aux_loss);
    }
    for (const ParamLayout* layout : {&t.layout(), &t.expert_layout()})
        for (const ParamTensor& p : layout->tensors()) {
            std::vector<float> v(size_t(p.numel));
            t.state().export_tensor(p, StateSlot::weights, v.data());
            r.result.tensors[p.name] = std::move(v);
        }
    return r;
}

// The parallel run against the accumulating single rank: losses, balance losses and drops per step, weights.
void check_capacity_run(const TrainConfig& c) {
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    const MoeRun got = run_moe(c, &grid);
    const MoeRun want = run_moe(accumulating_twin(c), nullptr);
    REQUIRE(got.result.losses.size() == want.result.losses.size());
    for (size_t s = 0; s < got.dropped.size(); ++s) {
        INFO("step " << s + 1);
        CHECK(got.dropped[s] == want.dropped[s]);
        CHECK(got.result.losses[s] == Approx(want.result.losses[s]).epsilon(1e-5));
        CHECK(got.aux[s] == Approx(want.aux[s]).epsilon(1e-5));
    }
    const std::vector<ParamLayout> layouts = rank_layouts(c, grid_coords(c.parallel, MpiRuntime::world_rank()));
    const double l2 = l2_relative(layouts, got.result.tensors, want.result.tensors);
    INFO("weights: L2 difference " << l2);
    CHECK(l2 < 1e-5);
}

}  // namespace

TEST_CASE("MoE under dp 2, its experts on every rank or spread over ep 2, reproduces one rank", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (int ep : {1, 2})
        for (int accum : {1, 2}) {
            TrainConfig c = moe_config(2, ep);
            c.grad_accum = accum;
            INFO("ep " << ep << ", grad-accum " << accum);
            check_against_one_rank(c);
        }
}

TEST_CASE("dp 2 x ep 2 with ZeRO-1, 2 and 3 reproduces one rank", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (int zero : {1, 2, 3}) {
        TrainConfig c = moe_config(2, 2);
        c.parallel.zero = zero;
        INFO("ZeRO-" << zero);
        check_against_one_rank(c);
    }
}

TEST_CASE("dp 2 x ep 2 with selective and full recomputation reproduces one rank", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (Recompute r : {Recompute::selective, Recompute::full}) {
        TrainConfig c = moe_config(2, 2);
        c.recompute = r;
        INFO("recompute " << recompute_name(r));
        check_against_one_rank(c);
    }
}

TEST_CASE("MoE under tp 2 (with and without sp), pp 2 and cp 2 reproduces one rank", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (bool sp : {false, true}) {
        TrainConfig c = moe_config(1, 1);
        c.parallel.tp = 2, c.parallel.sp = sp;
        INFO("tp 2, sp " << sp);
        check_against_one_rank(c);
    }
    {
        TrainConfig c = moe_config(1, 1);
        c.parallel.pp = 2, c.grad_accum = 2;
        INFO("pp 2, 1f1b");
        check_against_one_rank(c);
    }
    {
        TrainConfig c = moe_config(1, 1);
        c.parallel.cp = 2;
        INFO("cp 2, zigzag");
        check_against_one_rank(c);
    }
}

// bf16: within bf16's own rounding noise of the single-rank bf16 run (check_bf16_trajectory says how).
TEST_CASE("bf16 dp 2 x ep 2 follows the single-rank bf16 run", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    TrainConfig c = moe_config(2, 2);
    c.precision = Precision::bf16;
    TrainConfig fp32 = c;
    fp32.precision = Precision::fp32;
    const Result got = run_parallel(c), want = run_single(c), want32 = run_single(fp32);
    check_bf16_trajectory(rank_layouts(c, grid_coords(c.parallel, MpiRuntime::world_rank())),
                          {got.losses, got.tensors, want.losses, want.tensors, want32.tensors});
}

TEST_CASE("experts' capacity: dp 2 x ep 2 drops what one rank drops from the same micro-batches", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (double factor : {1.0, 1.25}) {
        TrainConfig c = moe_config(2, 2);
        c.moe_capacity_factor = factor;
        INFO("capacity factor " << factor);
        check_capacity_run(c);
    }
    // and a tight capacity does drop: the test above compares something
    TrainConfig tight = moe_config(2, 2, 1);
    tight.moe_capacity_factor = 0.5;
    ProcessGrid grid(tight.parallel, MpiRuntime::world());
    const MoeRun r = run_moe(tight, &grid);
    // capacity ceil(32 * 2 / 4 * 0.5) = 8 rows per expert of 64 choices per micro-batch: at least half dropped,
    // on each of the 2 ranks' micro-batches in each of the 2 MoE blocks
    CHECK(r.dropped[0] >= 2 * 2 * 32);
}

TEST_CASE("dp 2 x ep 2 resumes from its whole checkpoint as if never stopped", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    TrainConfig c = moe_config(2, 2, 4);
    const std::vector<double> straight = run_parallel(c).losses;
    const std::vector<double> resumed = losses_across_resume(c, rank0_temp_path("ep2-resume.safetensors"), 2);
    REQUIRE(resumed.size() == straight.size());
    for (size_t s = 0; s < straight.size(); ++s) CHECK(resumed[s] == Approx(straight[s]).epsilon(1e-6));
}

TEST_CASE("a rank holds E/ep experts of every MoE block", "[mpi][ep2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    TrainConfig c = moe_config(2, 2, 1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    CpuBackend be(1);
    Trainer t(c, be, &grid);
    const int64_t h = c.model.hidden, E = c.model.moe_experts, ep = 2, moe_layers = 2;
    CHECK(t.expert_layout().total() == moe_layers * (E / ep) * (8 * h * h + 5 * h));
    CHECK(t.expert_layout().first_expert() == int(grid.ep_rank() * E / ep));
    CHECK(t.layout().total() + t.expert_layout().total() ==
          c.model.num_params() - moe_layers * (E - E / ep) * (8 * h * h + 5 * h));
}

TEST_CASE("dp 4 x ep 4 and dp 4 x ep 2 with ZeRO reproduce one rank", "[mpi][ep4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (auto [ep, zero] : {std::pair{4, 0}, std::pair{2, 0}, std::pair{2, 1}, std::pair{2, 3}}) {
        TrainConfig c = moe_config(4, ep);
        c.parallel.zero = zero;
        INFO("ep " << ep << ", ZeRO-" << zero);
        check_against_one_rank(c);
    }
}

TEST_CASE("dp 2 x ep 2 with tp 2 (and sp) or pp 2 reproduces one rank", "[mpi][ep4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (bool sp : {false, true}) {
        TrainConfig c = moe_config(2, 2);
        c.parallel.tp = 2, c.parallel.sp = sp;
        INFO("tp 2, sp " << sp);
        check_against_one_rank(c);
    }
    TrainConfig c = moe_config(2, 2);
    c.parallel.pp = 2, c.grad_accum = 2;
    INFO("pp 2");
    check_against_one_rank(c);
}

TEST_CASE("dp 4 x ep 4 drops what one rank drops from the same micro-batches", "[mpi][ep4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    TrainConfig c = moe_config(4, 4);
    c.moe_capacity_factor = 1.0;
    check_capacity_run(c);
}
