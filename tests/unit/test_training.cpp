// Training as a whole: a falling loss, determinism, bitwise resume from a checkpoint, the data order and the
// learning-rate schedule.
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/data/data_loader.h"
#include "engine/train/trainer.h"
#include "test_util.h"

using namespace us;
using namespace us::test;

namespace {

TrainConfig tiny_run(int steps) {
    TrainConfig c;
    c.model.vocab = 256, c.model.hidden = 32, c.model.layers = 2, c.model.heads = 4, c.model.seq = 16;
    c.batch = 4;
    c.steps = steps;
    c.warmup = 2;
    c.adamw.lr = 3e-3;
    c.threads = 2;
    c.quiet = true;
    c.data = sample_data_file("training.txt", 40000);
    return c;
}

std::vector<double> run_losses(const TrainConfig& c) {
    CpuBackend be(2);
    Trainer t(c, be);
    std::vector<double> losses;
    while (t.steps_done() < c.steps) losses.push_back(t.train_step().loss);
    return losses;
}

}  // namespace

TEST_CASE("the loss falls on a learnable text", "[cpu][training]") {
    const auto losses = run_losses(tiny_run(40));
    CHECK(losses.front() > 5.0);  // about ln(256) at initialisation
    CHECK(losses.back() < losses.front() - 1.5);
}

TEST_CASE("the same seed gives bitwise identical losses", "[cpu][training]") {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
        TrainConfig c = tiny_run(6);
        c.precision = p;
        c.grad_accum = 2;
        const auto a = run_losses(c), b = run_losses(c);
        INFO(precision_name(p));
        for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == b[i]);
        c.seed = 7;
        CHECK(run_losses(c)[0] != a[0]);
    }
}

TEST_CASE("resuming from a checkpoint gives bitwise the same losses", "[cpu][training][checkpoint]") {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
        TrainConfig c = tiny_run(8);
        c.precision = p;
        const auto uninterrupted = run_losses(c);
        const std::string ckpt = temp_path(std::string("resume-") + std::string(precision_name(p)) + ".safetensors");
        std::vector<double> resumed;
        {
            CpuBackend be(2);
            TrainConfig first = c;
            Trainer t(first, be);
            for (int i = 0; i < 3; ++i) resumed.push_back(t.train_step().loss);
            t.save(ckpt);
        }
        {
            CpuBackend be(2);
            TrainConfig second = c;
            second.load = ckpt;
            Trainer t(second, be);
            REQUIRE(t.steps_done() == 3);
            while (t.steps_done() < c.steps) resumed.push_back(t.train_step().loss);
        }
        INFO(precision_name(p));
        REQUIRE(resumed.size() == uninterrupted.size());
        for (size_t i = 0; i < resumed.size(); ++i) CHECK(resumed[i] == uninterrupted[i]);
    }
}

TEST_CASE("gradient accumulation over m micro-batches equals one micro-batch m times larger", "[cpu][training]") {
    TrainConfig a = tiny_run(3), b = tiny_run(3);
    a.batch = 4, a.grad_accum = 2;
    b.batch = 8, b.grad_accum = 1;
    const auto la = run_losses(a), lb = run_losses(b);
    for (size_t i = 0; i < la.size(); ++i) CHECK(la[i] == Approx(lb[i]).epsilon(1e-5));
}

TEST_CASE("data order: windows, permutations, and dp shards that tile the single-rank batch", "[cpu][data]") {
    const TokenDataset data = TokenDataset::from_bytes(sample_text(10001), "sample");
    DataLayout one;
    one.seq = 100, one.micro_batch = 8, one.micro_batches = 2;
    DataLoader single(data, one, 11);
    CHECK(single.windows() == 100);
    const auto perm = epoch_permutation(100, 11, 0);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 100; ++i) REQUIRE(sorted[size_t(i)] == i);
    CHECK(epoch_permutation(100, 11, 1) != perm);  // a new order every epoch
    CHECK(single.window_start(3) == perm[3] * 100);
    CHECK(single.window_start(100 + 3) == epoch_permutation(100, 11, 1)[3] * 100);

    // two dp ranks with micro-batch 4 read exactly the rows of one rank with micro-batch 8
    std::vector<int32_t> big_tok(8 * 100), big_tgt(8 * 100);
    for (int64_t step = 0; step < 7; ++step)  // crosses an epoch boundary (16 windows per step)
        for (int mb = 0; mb < 2; ++mb) {
            single.fill(step, mb, big_tok.data(), big_tgt.data());
            for (int r = 0; r < 2; ++r) {
                DataLayout l = one;
                l.micro_batch = 4, l.dp_size = 2, l.dp_rank = r;
                DataLoader shard(data, l, 11);
                std::vector<int32_t> tok(4 * 100), tgt(4 * 100);
                shard.fill(step, mb, tok.data(), tgt.data());
                for (size_t i = 0; i < tok.size(); ++i) {
                    REQUIRE(tok[i] == big_tok[size_t(r) * 400 + i]);
                    REQUIRE(tgt[i] == big_tgt[size_t(r) * 400 + i]);
                }
            }
        }
    // targets are the inputs shifted by one byte
    CHECK(big_tgt[0] == big_tok[1]);
}

TEST_CASE("learning rate: linear warm-up, then cosine decay to the floor", "[cpu][optim]") {
    LrSchedule s;
    s.lr = 1.0, s.min_lr = 0.1, s.warmup = 4, s.total = 14;
    CHECK(s.at(1) == Approx(0.25));
    CHECK(s.at(4) == Approx(1.0));
    CHECK(s.at(9) == Approx(0.55));  // halfway through the decay
    CHECK(s.at(14) == Approx(0.1));
    CHECK(s.at(20) == Approx(0.1));
}
