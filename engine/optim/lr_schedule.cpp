#include "engine/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace us {

double LrSchedule::at(int step) const {
    if (warmup > 0 && step <= warmup) return lr * double(step) / double(warmup);
    if (total <= warmup) return lr;
    const double progress = std::clamp(double(step - warmup) / double(total - warmup), 0.0, 1.0);
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace us
