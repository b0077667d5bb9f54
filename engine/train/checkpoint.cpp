#include "engine/train/checkpoint.h"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/train/safetensors.h"

namespace us {

namespace {

constexpr const char* kFormat = "ultrascope-checkpoint";
constexpr const char* kVersion = "1";

// The whole tensor's shape, as a single rank holds it (checkpoints never hold tensor-parallel shards).
std::vector<int64_t> tensor_shape(const ParamTensor& t) {
    if (t.whole_cols > 1) return {t.whole_rows, t.whole_cols};
    return {t.whole_numel()};
}

nlohmann::json model_json(const GPTConfig& m) {
    nlohmann::json j = {
        {"vocab", m.vocab}, {"hidden", m.hidden}, {"layers", m.layers}, {"heads", m.heads}, {"seq", m.seq}};
    if (m.is_moe()) {  // dense checkpoints keep their metadata as it was
        j["moe_experts"] = m.moe_experts;
        j["moe_topk"] = m.moe_topk;
        j["moe_every"] = m.moe_every;
    }
    return j;
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainConfig& cfg, const std::vector<const ParamLayout*>& layouts,
                     TrainState& state, int steps_done, bool write) {
    const bool moments = state.has_optimizer_moments();
    const int slots = moments ? 3 : 1;
    std::vector<std::vector<float>> host;
    SafetensorsWriter w;
    const char* prefixes[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    for (const ParamLayout* layout : layouts) {
        US_ASSERT(layout->tp().tp == 1,
                  "a checkpoint is written from whole tensors (Trainer::save gathers the shards)");
        host.emplace_back(size_t(layout->total()) * size_t(slots));
        for (int s = 0; s < slots; ++s) {
            float* base = host.back().data() + size_t(s) * size_t(layout->total());
            for (const ParamTensor& t : layout->tensors()) {
                state.export_tensor(t, StateSlot(s), base + t.offset);
                w.add(prefixes[s] + t.name, "F32", tensor_shape(t), base + t.offset, size_t(t.numel) * 4);
            }
        }
    }
    w.set_metadata("format", kFormat);
    w.set_metadata("version", kVersion);
    w.set_metadata("model", model_json(cfg.model).dump());
    w.set_metadata("precision", std::string(precision_name(cfg.precision)));
    w.set_metadata("seed", std::to_string(cfg.seed));
    w.set_metadata("steps_done", std::to_string(steps_done));
    w.set_metadata("optimizer_steps", std::to_string(state.optimizer_steps_taken()));
    w.set_metadata("layout", "gathered");
    w.set_metadata("config", cfg.to_json().dump());
    if (write) w.write_atomically(path);
}

CheckpointInfo load_checkpoint(const std::string& path, const TrainConfig& cfg,
                               const std::vector<const ParamLayout*>& layouts, TrainState& state) {
    const ParamLayout& layout = *layouts.front();
    const SafetensorsFile f = SafetensorsFile::read(path);
    CheckpointInfo info;
    const std::string format = f.metadata_or("format", "");
    if (!format.empty()) {
        US_CHECK_INPUT(format == kFormat, "'{}' is a '{}' file, not an Ultrascope checkpoint", path, format);
        US_CHECK_INPUT(f.metadata_or("version", "") == kVersion,
                       "checkpoint '{}' has format version {}, this build reads version {}", path,
                       f.metadata_or("version", "?"), kVersion);
        nlohmann::json saved;
        try {
            saved = nlohmann::json::parse(f.metadata_or("model", "{}"));
        } catch (const nlohmann::json::exception&) {
            fail_user("checkpoint '{}' has corrupt model metadata", path);
        }
        const nlohmann::json want = model_json(cfg.model);
        for (auto it = want.begin(); it != want.end(); ++it) {
            if (it.key() == "seq") continue;  // RoPE has no position table: any sequence length loads
            US_CHECK_INPUT(saved.contains(it.key()) && saved[it.key()] == *it,
                           "checkpoint '{}' holds a model with {} {} but this run asks for {} {}: pass the "
                           "checkpoint's shape (--{} {}, or its --preset)",
                           path, it.key(), saved.value(it.key(), nlohmann::json()).dump(), it.key(), it->dump(),
                           it.key(), saved.value(it.key(), nlohmann::json()).dump());
        }
        try {
            info.steps_done = std::stoi(f.metadata_or("steps_done", "0"));
            info.seed = std::stoull(f.metadata_or("seed", "0"));
            state.set_optimizer_steps(std::stoi(f.metadata_or("optimizer_steps", "0")));
        } catch (const std::exception&) {
            fail_user("checkpoint '{}' has corrupt step or seed metadata", path);
        }
    }
    std::vector<float> values, shard;
    const char* prefixes[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    info.has_optimizer_state = f.find(std::string(prefixes[1]) + layout.tensors().front().name) != nullptr;
    for (const ParamLayout* each : layouts)
        for (int s = 0; s < (info.has_optimizer_state ? 3 : 1); ++s) {
            for (const ParamTensor& t : each->tensors()) {
                const std::string name = prefixes[s] + t.name;
                const SafeTensor* st = f.find(name);
                US_CHECK_INPUT(st, "checkpoint '{}' has no tensor '{}'", path, name);
                US_CHECK_INPUT(
                    st->shape == tensor_shape(t),
                    "checkpoint '{}': tensor '{}' has shape {} but this model needs {}: the checkpoint is of "
                    "another shape",
                    path, name, nlohmann::json(st->shape).dump(), nlohmann::json(tensor_shape(t)).dump());
                values.resize(size_t(t.whole_numel()));
                if (st->dtype == "F32") {
                    std::memcpy(values.data(), st->data, size_t(t.whole_numel()) * 4);
                } else if (st->dtype == "BF16") {
                    for (int64_t i = 0; i < t.whole_numel(); ++i) {
                        bf16 b;
                        std::memcpy(&b.bits, st->data + 2 * i, 2);
                        values[size_t(i)] = bf16_to_f32(b);
                    }
                } else {
                    fail_user("checkpoint '{}': tensor '{}' has dtype {}; expected F32 or BF16", path, name, st->dtype);
                }
                if (each->tp().tp == 1) {
                    state.import_tensor(t, StateSlot(s), values.data());
                } else {  // resharding on load: this rank's shard of the whole tensor
                    shard.resize(size_t(t.numel));
                    take_shard(t, each->tp(), values.data(), shard.data());
                    state.import_tensor(t, StateSlot(s), shard.data());
                }
            }
        }
    return info;
}

}  // namespace us
