// The training flags are one table (common/settings/cli.cpp): it parses them and writes them back. These tests give
// every flag a value other than its default and check the round trips: flags -> config -> flags -> the same config,
// and config -> JSON (--print-config, a trace's metadata) -> config. A flag added to the table without a case here
// fails the first test.
#include <set>

#include "common/settings/cli.h"
#include "test_util.h"

using namespace us;

namespace {

// Every flag with a non-default value (switches alone). --global-batch is left to its own case (it sets grad_accum).
const std::vector<std::vector<std::string>> kEveryFlag = {{"--layers", "3"},
                                                          {"--hidden", "96"},
                                                          {"--heads", "6"},
                                                          {"--vocab", "320"},
                                                          {"--seq", "48"},
                                                          {"--moe-experts", "4"},
                                                          {"--moe-topk", "1"},
                                                          {"--moe-every", "2"},
                                                          {"--moe-capacity-factor", "1.25"},
                                                          {"--moe-aux-loss-coef", "0.02"},
                                                          {"--batch", "3"},
                                                          {"--grad-accum", "5"},
                                                          {"--steps", "7"},
                                                          {"--lr", "0.0006"},
                                                          {"--warmup", "4"},
                                                          {"--min-lr-ratio", "0.15"},
                                                          {"--weight-decay", "0.05"},
                                                          {"--grad-clip", "0.5"},
                                                          {"--seed", "1234567890123"},
                                                          {"--precision", "bf16"},
                                                          {"--fp32-grad-accum"},
                                                          {"--recompute", "selective"},
                                                          {"--attention", "flash"},
                                                          {"--data", "some/text.txt"},
                                                          {"--save", "out.safetensors"},
                                                          {"--save-every", "3"},
                                                          {"--load", "in.safetensors"},
                                                          {"--metrics-out", "m.jsonl"},
                                                          {"--threads", "3"},
                                                          {"--device", "cuda"},
                                                          {"--quiet"},
                                                          {"--dp", "2"},
                                                          {"--pp", "3"},
                                                          {"--tp", "2"},
                                                          {"--sp"},
                                                          {"--cp", "2"},
                                                          {"--cp-balance", "contiguous"},
                                                          {"--cp-comm", "allgather"},
                                                          {"--ep", "2"},
                                                          {"--zero", "1"},
                                                          {"--pp-schedule", "interleaved"},
                                                          {"--pp-chunks", "2"},
                                                          {"--bucket-mb", "0.75"},
                                                          {"--no-overlap"},
                                                          {"--overlap-alternate"},
                                                          {"--comm-progress", "poll"},
                                                          {"--nccl-shared-gpu"},
                                                          {"--slow-rank", "1"},
                                                          {"--slow-factor", "3"},
                                                          {"--slow-kind", "load"},
                                                          {"--fr-buffer-size", "500"},
                                                          {"--fr-dump-dir", "dumps"},
                                                          {"--hang-timeout", "7.5"},
                                                          {"--hang-rank", "1"},
                                                          {"--hang-at-step", "2"},
                                                          {"--hang-kind", "p2p"},
                                                          {"--trace", "t.ustrace"},
                                                          {"--connect", "127.0.0.1:9"},
                                                          {"--fault-kill-step", "2"},
                                                          {"--fault-kill-rank", "1"}};

TrainConfig parse(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : args) argv.push_back(a.c_str());
    return parse_train_args(int(argv.size()), argv.data()).cmd.config;
}

}  // namespace

TEST_CASE("every training flag survives flags -> config -> flags -> config", "[cpu][config]") {
    std::set<std::string> covered;
    std::vector<std::string> args;
    for (const auto& f : kEveryFlag) {
        covered.insert(f[0]);
        args.insert(args.end(), f.begin(), f.end());
    }
    for (const std::string& name : train_flag_names()) {
        INFO("the flag " << name << " has no case in kEveryFlag");
        CHECK((covered.count(name) == 1 || name == "--global-batch"));
    }
    const TrainConfig first = parse(args);
    const std::vector<std::string> written = train_args_of(first);
    // every flag given is written back (each differs from its default)
    for (const auto& f : kEveryFlag) {
        INFO(f[0]);
        CHECK(std::find(written.begin(), written.end(), f[0]) != written.end());
    }
    const TrainConfig second = parse(written);
    CHECK(second.to_json() == first.to_json());
    CHECK(train_args_of(second) == written);
    // the fields to_json leaves out (where the run writes, fault injection) round-trip too
    CHECK(second.save == "out.safetensors");
    CHECK(second.load == "in.safetensors");
    CHECK(second.metrics_out == "m.jsonl");
    CHECK(second.save_every == 3);
    CHECK(second.trace == "t.ustrace");
    CHECK(second.connect == "127.0.0.1:9");
    CHECK(second.quiet);
    CHECK(second.fault_step == 2);
    CHECK(second.fault_rank == 1);
    CHECK(second.fr_dump_dir == "dumps");
    CHECK(second.hang_kind == "p2p");
    CHECK(second.adamw.lr == 0.0006);  // exactly: written in the shortest form that reads back the same double
    CHECK(second.seed == 1234567890123ull);
}

TEST_CASE("a default config needs no flags, a preset's config writes what differs", "[cpu][config]") {
    CHECK(train_args_of(TrainConfig{}).empty());
    const TrainConfig small = parse({"--preset", "small", "--global-batch", "32"});
    const std::vector<std::string> written = train_args_of(small);
    CHECK(std::find(written.begin(), written.end(), "--preset") == written.end());  // self-contained
    const TrainConfig again = parse(written);
    CHECK(again.to_json().dump() ==
          [&] {
              auto j = small.to_json();
              j["preset"] = again.preset;  // the preset's name is not a flag of the result
              return j;
          }()
              .dump());
    CHECK(again.grad_accum == small.grad_accum);
}

TEST_CASE("every setting survives config -> JSON -> config", "[cpu][config]") {
    std::vector<std::string> args;
    for (const auto& f : kEveryFlag) args.insert(args.end(), f.begin(), f.end());
    const TrainConfig first = parse(args);
    TrainConfig second;
    apply_config_json(second, first.to_json(), "test");
    CHECK(second.to_json() == first.to_json());
}
