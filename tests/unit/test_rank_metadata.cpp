// A rank's metadata is written and read through one type (profiler/transport/rank_metadata.h) by the engine, the
// planner and RunInfo. These tests check that the committed traces (recorded by ultrascope-train on an H100) read
// into it and write back byte for byte the same JSON (so the format did not change), and that a planner's predicted
// run reads back as RunInfo with its settings, grid and source.
#include <catch2/catch.hpp>

#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/model_desc.h"
#include "app/plan/predicted_trace.h"
#include "profiler/trace/run_info.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/rank_metadata.h"
#include "test_util.h"

using namespace us;

TEST_CASE("rank metadata: the committed engine traces read back into the type unchanged", "[cpu][schema][run-info]") {
    for (const char* file : {"small-h100.ustrace", "dp2-shared-h100.ustrace"}) {
        INFO(file);
        prof::TraceStore store;
        prof::load_trace(std::string(US_TEST_DATA_DIR) + "/gpu/" + file, store);
        REQUIRE(!store.ranks().empty());
        for (int r : store.ranks()) {
            const nlohmann::json& written = store.rank(r)->metadata;
            const prof::RankMetadata m = prof::rank_metadata_from_json(written);
            CHECK(m.rank == r);
            CHECK(m.settings.has_value());
            CHECK(m.clock.has_value());
            CHECK(m.cupti.has_value());
            CHECK(to_json(m) == written);  // every key the engine wrote is one of the type's
        }
        const prof::RunInfo run = prof::run_info_of(store);
        CHECK(run.source == "engine");
        CHECK(run.backend == "cuda");
        CHECK(!run.comm_backend.empty());
        CHECK(run.grid.value("dp", 0) >= 1);
        REQUIRE(run.settings.has_value());
        CHECK(run.settings->contains("zero"));
        // and RunInfo's own serializer keeps what it read
        const prof::RunInfo again = prof::run_info_from_json(prof::to_json(run));
        CHECK(prof::to_json(again) == prof::to_json(run));
    }
}

TEST_CASE("rank metadata: a planner's predicted run reads back as RunInfo", "[cpu][schema][run-info][planner]") {
    const predict::ModelDesc m = predict::load_model("small");
    const predict::ClusterDesc c = predict::load_cluster("h100-sxm");
    predict::Layout l;
    l.parallel.dp = 2, l.parallel.pp = 2, l.micro_batch = 2, l.grad_accum = 4, l.bf16 = true, l.fp32_grad_accum = true;
    l.parallel.overlap = false, l.parallel.bucket_mb = 0.5;
    const auto store = plan::predicted_store(m, c, predict::evaluate(m, c, l), l.world());
    const nlohmann::json& written = store->run_metadata();
    const prof::RankMetadata meta = prof::rank_metadata_from_json(written);
    CHECK(to_json(meta) == written);
    CHECK(meta.predicted.has_value());
    CHECK(!meta.pid.has_value());  // nothing ran
    const prof::RunInfo run = prof::run_info_of(*store);
    CHECK(run.source == "planner");
    CHECK(run.grid.value("pp", 0) == 2);
    REQUIRE(run.settings.has_value());
    // the predicted run's settings are the layout's, none dropped (overlap, bucket, fp32 accumulation included)
    CHECK((*run.settings)["overlap"] == false);
    CHECK((*run.settings)["bucket_mb"] == 0.5);
    CHECK((*run.settings)["fp32_grad_accum"] == true);
    CHECK((*run.settings)["precision"] == "bf16");
    CHECK((*run.settings)["layers"] == m.layers);
}
