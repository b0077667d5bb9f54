// Tensor parallelism (Megatron) and sequence parallelism against one rank: the losses of every step and, after 5
// steps, every rank's shard of every tensor equal the single-rank run of the same global batch (fp32, 1e-5
// relative; measured differences are about 1e-8: only the order of the partial sums changes). Composition with
// dp, pp, ZeRO, recompute and bf16; the replicated parameters stay bitwise equal across the tp group; parameter
// and activation bytes per rank against the formulas; checkpoints saved at one tp load at another.
#include <cstring>

#include "mpi_test_util.h"

using namespace us;
using namespace us::test;

namespace {

TrainConfig tp_config(int tp, bool sp, int layers = 2) {
    TrainConfig c = small_config(layers, 5);
    c.parallel.tp = tp;
    c.parallel.sp = sp;
    return c;
}

// Every tensor the tp group replicates, as this rank holds it, gathered from every rank of the group.
void check_replicated_identical(const TrainConfig& c) {
    CpuBackend be(1);
    ProcessGrid grid(c.parallel, MpiRuntime::world());
    Trainer t(c, be, &grid);
    train_losses(t, c.steps);
    std::vector<float> mine;
    for (const ParamTensor& p : t.layout().tensors()) {
        if (p.split != TpSplit::replicated) continue;
        std::vector<float> v(size_t(p.numel));
        t.state().export_tensor(p, StateSlot::weights, v.data());
        mine.insert(mine.end(), v.begin(), v.end());
    }
    REQUIRE(!mine.empty());
    const int tp = grid.tp_size();
    std::vector<float> all(mine.size() * size_t(tp));
    grid.tp_group().all_gather_bytes(mine.data(), mine.size() * sizeof(float), all.data());
    for (int r = 1; r < tp; ++r)
        CHECK(std::memcmp(all.data(), all.data() + size_t(r) * mine.size(), mine.size() * sizeof(float)) == 0);
}

}  // namespace

// ---- two ranks

TEST_CASE("tp 2 with and without sequence parallelism reproduces one rank", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (bool sp : {false, true})
        for (int accum : {1, 2}) {
            TrainConfig c = tp_config(2, sp);
            c.grad_accum = accum;
            INFO("sp " << sp << ", grad-accum " << accum);
            check_against_one_rank(c);
        }
}

TEST_CASE("tp 2 composes with ZeRO-1, ZeRO-3, recomputation and flash attention", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (bool sp : {false, true}) {
        for (int zero : {1, 3}) {
            TrainConfig c = tp_config(2, sp);
            c.parallel.zero = zero;
            c.parallel.bucket_mb = 0.01;
            INFO("sp " << sp << ", ZeRO-" << zero);
            check_against_one_rank(c);
        }
        for (Recompute r : {Recompute::selective, Recompute::full}) {
            TrainConfig c = tp_config(2, sp);
            c.recompute = r;
            INFO("sp " << sp << ", recompute " << recompute_name(r));
            check_against_one_rank(c);
        }
        TrainConfig flash = tp_config(2, sp);  // blockwise attention over each rank's heads
        flash.attention = Attention::flash;
        INFO("sp " << sp << ", flash attention");
        check_against_one_rank(flash);
    }
}

TEST_CASE("replicated parameters stay bitwise identical across the tp group", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    // With sequence parallelism each rank computes the LayerNorm and row-parallel bias gradients over its own
    // token rows: without the all-reduce over tp the ranks' copies would drift apart (the classic bug).
    for (bool sp : {false, true}) {
        INFO("sp " << sp);
        check_replicated_identical(tp_config(2, sp));
    }
}

TEST_CASE("parameter, gradient and optimizer bytes per rank follow the tp formula", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    for (Precision precision : {Precision::fp32, Precision::bf16}) {
        TrainConfig c = tp_config(2, false);
        c.precision = precision;
        c.steps = 1;
        CpuBackend be(1);
        ProcessGrid grid(c.parallel, MpiRuntime::world());
        Trainer t(c, be, &grid);
        t.train_step();
        // N_tp = h*ceil(v/tp) + L*(12h^2/tp + 7h/tp + 6h) + 2h (docs/formulas.md)
        const int64_t h = c.model.hidden, v = c.model.vocab, L = c.model.layers, tp = 2;
        const int64_t n_tp = h * ((v + tp - 1) / tp) + L * (12 * h * h / tp + 7 * h / tp + 6 * h) + 2 * h;
        const int64_t e = precision == Precision::bf16 ? 2 : 4;
        const MemoryStats m = be.allocator().stats();
        INFO(precision_name(precision));
        CHECK(t.layout().total() == n_tp);
        CHECK(m.current_of(MemCategory::params) == e * n_tp);
        CHECK(m.current_of(MemCategory::grads) == e * n_tp);
        CHECK(m.current_of(MemCategory::master_params) == (precision == Precision::bf16 ? 4 * n_tp : 0));
        CHECK(m.current_of(MemCategory::optimizer_state) == 8 * n_tp);
    }
}

TEST_CASE("activation bytes per layer follow the tp and tp + sp breakdown, and sp lowers the peak", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    int64_t peak[2] = {0, 0};
    for (bool sp : {false, true}) {
        TrainConfig c = tp_config(2, sp);
        c.steps = 1;
        CpuBackend be(1);
        ProcessGrid grid(c.parallel, MpiRuntime::world());
        Trainer t(c, be, &grid);
        const ActivationShape& sh = t.model().shape();
        const int64_t e = 4, N = sh.N(), C = sh.C, tp = 2, probs = int64_t(sh.B) * sh.NH * sh.T * sh.T;
        // docs/memory.md: tp: e(4NC + 12NC/tp + B NH T^2/tp) + 16N; tp + sp: (e(16NC + B NH T^2) + 16N) / tp
        const int64_t per_layer =
            sp ? (e * (16 * N * C + probs) + 16 * N) / tp : e * (4 * N * C + 12 * N * C / tp + probs / tp) + 16 * N;
        INFO("sp " << sp);
        CHECK(block_saved_bytes(sh, Recompute::none) == per_layer);
        // Measured after a forward: tokens and targets, the embedding output (R,C), every block, the head
        // (final norm output and statistics on R rows, fp32 logits of the rank's vocabulary, losses, softmax stats).
        const int64_t R = sp ? N / tp : N, Vr = (c.model.vocab + tp - 1) / tp;
        const int64_t head = e * R * C + 2 * R * 4 + N * Vr * 4 + N * 4 + 3 * N * 4;
        ChunkActivations acts;
        std::vector<int32_t> tok(static_cast<size_t>(N)), tgt(static_cast<size_t>(N));
        for (int64_t i = 0; i < N; ++i) tok[size_t(i)] = int32_t(i % 256), tgt[size_t(i)] = int32_t((i * 7 + 3) % 256);
        t.state().begin_step();
        t.state().begin_backward(0, true);
        t.chunk_model(0).forward(acts, {tok.data(), tgt.data()}, Tensor{}, t.state());
        CHECK(be.allocator().stats().current_of(MemCategory::activations) ==
              2 * N * 4 + e * R * C + c.model.layers * per_layer + head);
        t.chunk_model(0).backward(acts, Tensor{}, Tensor{}, 1.0f, t.state());
        be.allocator().reset_peaks();
        t.train_step();
        peak[sp] = be.allocator().stats().peak_of(MemCategory::activations);
    }
    // What SP saves at the peak (after the last block's forward, with the head): per layer the (R,C) tensors and
    // statistics become 1/tp of themselves, as do the embedding output and the head's norm output and statistics.
    TrainConfig c = tp_config(2, false);
    const int64_t e = 4, N = int64_t(c.batch) * c.model.seq, C = c.model.hidden, L = c.model.layers, tp = 2;
    const int64_t saved_per_layer = (e * 4 * N * C + 16 * N) * (tp - 1) / tp;  // ln1, residual2, ln2, output, stats
    const int64_t saved_outside = (e * N * C) * (tp - 1) / tp + (e * N * C + 8 * N) * (tp - 1) / tp;
    CHECK(peak[0] - peak[1] == L * saved_per_layer + saved_outside);
}

TEST_CASE("a checkpoint saved at tp 2 resumes at tp 2 (bitwise) and at tp 1 (fp32 reduction order)", "[mpi][tp2]") {
    REQUIRE(MpiRuntime::world_size() == 2);
    TrainConfig c = tp_config(2, true);
    c.steps = 6;
    const Result whole = run_parallel(c);
    const std::string path = rank0_temp_path("resume-tp2.safetensors");
    // tp 2 -> tp 2: the same ranks reduce in the same order, so the continuation is bitwise the same.
    const std::vector<double> resumed = losses_across_resume(c, path, 3);
    for (size_t s = 0; s < whole.losses.size(); ++s) CHECK(resumed[s] == whole.losses[s]);
    // tp 2 -> tp 1 on each rank alone: the checkpoint holds whole tensors; one rank sums the row-parallel partial
    // products inside one GEMM instead of two GEMMs and an all-reduce, which moves the last bits only.
    TrainConfig single = c;
    single.parallel = ParallelLayout{};
    single.load = path;
    CpuBackend be(1);
    Trainer t(single, be);
    REQUIRE(t.steps_done() == 3);
    const std::vector<double> rest = train_losses(t, c.steps);
    for (size_t s = 0; s < rest.size(); ++s) CHECK(rest[s] == Approx(whole.losses[3 + s]).epsilon(1e-6));
}

// ---- three ranks: a vocabulary that does not divide

TEST_CASE("tp 3 pads a vocabulary of 256 without changing the loss", "[mpi][tp3]") {
    REQUIRE(MpiRuntime::world_size() == 3);
    for (bool sp : {false, true}) {
        TrainConfig c = small_config(2, 5);
        c.model.hidden = 48, c.model.heads = 3, c.model.seq = 18;  // heads and seq divide by 3; 256 does not
        c.parallel.tp = 3;
        c.parallel.sp = sp;
        INFO("sp " << sp);
        CHECK(Trainer::rank_layout(c, 0, 2).vocab_valid() == 256 - 2 * 86);  // rows 172..255, then 2 of padding
        check_against_one_rank(c);
    }
}

// ---- four ranks (oversubscribed on two cores)

TEST_CASE("tp 4 with and without sequence parallelism reproduces one rank", "[mpi][tp4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (bool sp : {false, true}) {
        INFO("sp " << sp);
        check_against_one_rank(tp_config(4, sp));
    }
}

TEST_CASE("dp 2 x tp 2 and pp 2 x tp 2 reproduce one rank", "[mpi][tp4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (bool sp : {false, true}) {
        TrainConfig dp = tp_config(2, sp);
        dp.parallel.dp = 2;
        INFO("dp 2 x tp 2, sp " << sp);
        check_against_one_rank(dp);
        TrainConfig pp = tp_config(2, sp, 4);
        pp.parallel.pp = 2;
        pp.parallel.pp_schedule = PipelineSchedule::one_f_one_b;
        pp.grad_accum = 4;
        INFO("pp 2 x tp 2 (1F1B, 4 micro-batches), sp " << sp);
        check_against_one_rank(pp);
    }
}

// bf16: the parallel run follows the single-rank bf16 run within bf16's own rounding noise (check_bf16_trajectory
// in mpi_test_util.h says how that is measured and why).
TEST_CASE("bf16 dp 2 x tp 2 follows the single-rank bf16 run", "[mpi][tp4]") {
    REQUIRE(MpiRuntime::world_size() == 4);
    for (bool sp : {false, true}) {
        TrainConfig c = tp_config(2, sp);
        c.parallel.dp = 2;
        c.precision = Precision::bf16;
        TrainConfig fp32 = c;
        fp32.precision = Precision::fp32;
        const Result got = run_parallel(c), want = run_single(c), want32 = run_single(fp32);
        INFO("sp " << sp);
        check_bf16_trajectory(rank_layouts(c, grid_coords(c.parallel, MpiRuntime::world_rank())),
                              {got.losses, got.tensors, want.losses, want.tensors, want32.tensors});
    }
}
