// The planner's search on every core with its shared work (app/plan/evaluate_layouts.h, profiler/predict/
// shared_work.h) finds what one thread evaluating every layout from scratch finds: the same layouts in the same
// order, ties included, with every figure of each equal to the last bit, for models of each family (the engine's
// GPT and its MoE through the engine's walk, dense and MoE descriptions through the formulas).
#include <nlohmann/json.hpp>

#include "app/plan/planner.h"
#include "test_util.h"

using namespace us;
using namespace us::plan;
using namespace us::predict;

namespace {

void check_same(const ModelDesc& m, const ClusterDesc& c, const SearchResult& a, const SearchResult& b) {
    CHECK(a.considered == b.considered);
    CHECK(a.sampled_out == b.sampled_out);
    CHECK(a.pruned == b.pruned);
    REQUIRE(a.ranked.size() == b.ranked.size());
    for (size_t i = 0; i < a.ranked.size(); ++i) {
        INFO(m.name << " #" << i << ": " << a.ranked[i].layout.describe());
        // plan_json holds every figure evaluate() makes (memory by category, time by piece, the verdict): compared
        // as JSON, doubles by value.
        CHECK(plan_json(m, c, a.ranked[i]) == plan_json(m, c, b.ranked[i]));
    }
}

}  // namespace

TEST_CASE("planner: the search's ranking and figures do not depend on its threads or its shared work", "[planner]") {
    struct Case {
        ModelDesc model;
        int64_t gpus, sequences;
    };
    const std::vector<Case> cases = {
        {load_model("llama3-8b"), 16, 64},         {load_model("mixtral-8x7b"), 16, 128},
        {load_model("gpt3-1.3b"), 32, 256},        {engine_preset_model("small"), 8, 32},
        {engine_preset_model("small-moe"), 8, 32},
    };
    const ClusterDesc c = load_cluster("h100-sxm");
    for (const Case& k : cases) {
        SearchOptions o;
        o.gpus = k.gpus, o.global_batch_sequences = k.sequences;
        o.threads = 1, o.share_work = false;  // one thread, every layout from scratch: the reference
        const SearchResult alone = search(k.model, c, o);
        REQUIRE(alone.considered > 100);
        for (const auto& [threads, share] :
             {std::pair{1, true}, std::pair{3, false}, std::pair{4, true}, std::pair{0, true}}) {
            INFO(k.model.name << ": " << threads << " thread(s), sharing " << share);
            o.threads = threads, o.share_work = share;
            check_same(k.model, c, alone, search(k.model, c, o));
        }
    }
}
