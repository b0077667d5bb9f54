// AdamW's hyperparameters: part of the training settings (common/settings/config.h), apart from the optimizer itself so
// that the settings need no backend.
#pragma once

namespace us {

struct AdamWConfig {
    double lr = 3e-4;
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    double weight_decay = 0.1;
};

}  // namespace us
