// Trains a config two steps on one CPU rank and checks the peak of every category the prediction models against it
// (the engine's exact walk, profiler/predict/predict.h). Returns the prediction for further checks.
#pragma once

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/train/trainer.h"
#include "profiler/predict/predict.h"
#include "test_util.h"

namespace us::test {

inline predict::Prediction check_memory_as_predicted(const TrainConfig& c) {
    CpuBackend be(2);
    Trainer t(c, be);
    t.train_step();
    t.train_step();
    const predict::Prediction p = predict::predict(predict::PredictInput::from_config(c.to_json()));
    const MemoryStats m = be.allocator().stats();
    for (MemCategory k : {MemCategory::params, MemCategory::grads, MemCategory::master_params,
                          MemCategory::optimizer_state, MemCategory::activations, MemCategory::temporaries}) {
        INFO(kMemCategoryNames[size_t(k)]);
        CHECK(m.peak_of(k) == *p.memory[size_t(k)]);
    }
    return p;
}

}  // namespace us::test
