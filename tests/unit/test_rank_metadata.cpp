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
#include "profiler/transport/trace_file.h"
#include "test_util.h"

using namespace us;

namespace {

// The metadata records as a trace file holds them, by rank (the store keeps only their typed reading).
std::map<int, nlohmann::json> written_metadata(const std::string& path) {
    std::map<int, nlohmann::json> out;
    prof::read_trace(path, [&](prof::Chunk&& c) {
        if (c.kind == prof::ChunkKind::metadata) out[int(c.rank)] = nlohmann::json::parse(c.text);
    });
    return out;
}

}  // namespace

TEST_CASE("rank metadata: the committed engine traces read back into the type unchanged", "[cpu][schema][run-info]") {
    for (const char* file : {"small-h100.ustrace", "dp2-shared-h100.ustrace"}) {
        INFO(file);
        prof::TraceStore store;
        const std::string path = std::string(US_TEST_DATA_DIR) + "/gpu/" + file;
        prof::load_trace(path, store);
        REQUIRE(!store.ranks().empty());
        const std::map<int, nlohmann::json> metadata = written_metadata(path);
        for (int r : store.ranks()) {
            const nlohmann::json& written = metadata.at(r);
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
        CHECK(run.grid.dp.value_or(0) >= 1);
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
    const predict::PlanResult plan = predict::evaluate(m, c, l);
    const auto store = plan::predicted_store(m, c, plan, l.world());
    std::map<int, nlohmann::json> records;  // the metadata records as the planner writes them, by rank
    for (const prof::Chunk& chunk : plan::predicted_trace(m, c, plan, l.world()))
        if (chunk.kind == prof::ChunkKind::metadata) records[int(chunk.rank)] = nlohmann::json::parse(chunk.text);
    const nlohmann::json& written = records.begin()->second;  // the first rank's: the run's
    const prof::RankMetadata meta = prof::rank_metadata_from_json(written);
    CHECK(to_json(meta) == written);
    CHECK(meta.predicted.has_value());
    CHECK(!meta.pid.has_value());  // nothing ran
    const prof::RunInfo run = prof::run_info_of(*store);
    CHECK(run.source == "planner");
    CHECK(run.grid.pp.value_or(0) == 2);
    REQUIRE(run.settings.has_value());
    // the predicted run's settings are the layout's, none dropped (overlap, bucket, fp32 accumulation included)
    CHECK((*run.settings)["overlap"] == false);
    CHECK((*run.settings)["bucket_mb"] == 0.5);
    CHECK((*run.settings)["fp32_grad_accum"] == true);
    CHECK((*run.settings)["precision"] == "bf16");
    CHECK((*run.settings)["layers"] == m.layers);
}

TEST_CASE("rank metadata: grid coordinates and sizes are typed, unknown where the record does not say",
          "[cpu][schema][run-info]") {
    const nlohmann::json engine = nlohmann::json::parse(
        R"({"rank": 3, "world_size": 4, "coords": {"dp": 1, "pp": 1, "tp": 0, "cp": 0, "ep": 0},
            "grid": {"dp": 2, "pp": 2, "tp": 1, "cp": 1, "ep": 1}, "microbatches": 8})");
    const prof::RankMetadata m = prof::rank_metadata_from_json(engine);
    CHECK(m.coords.dp == 1);
    CHECK(m.coords.pp == 1);
    CHECK(m.grid.pp == 2);
    CHECK(m.microbatches == 8);
    const nlohmann::json written = to_json(m);
    CHECK(written["coords"] == engine["coords"]);
    CHECK(written["grid"] == engine["grid"]);
    CHECK(written["microbatches"] == 8);
    // an imported rank names no grid: every dimension unknown (not 0), written back as the {} it came as
    const prof::RankMetadata imported =
        prof::rank_metadata_from_json(nlohmann::json::parse(R"({"rank": 1, "source": "kineto", "coords": {}})"));
    CHECK(imported.coords.empty());
    CHECK_FALSE(imported.coords.pp.has_value());
    CHECK_FALSE(imported.microbatches.has_value());
    CHECK(imported.world_size == 0);  // not said: the store counts its ranks
    CHECK(to_json(imported)["coords"] == nlohmann::json::object());
    // a key of another type is unknown too
    CHECK_FALSE(prof::grid_from_json<prof::GridCoords>(nlohmann::json::parse(R"({"pp": "1"})")).pp.has_value());
}
