// Learning rate: linear warm-up from 0 to lr over `warmup` steps, then cosine decay to min_lr at `total` steps.
#pragma once

namespace us {

struct LrSchedule {
    double lr = 3e-4;
    double min_lr = 3e-5;
    int warmup = 0;
    int total = 1;

    // step is 1-based (the step being taken).
    double at(int step) const;
};

}  // namespace us
