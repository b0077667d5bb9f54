// How the model reaches the weights and gradients of a parameter unit during a pass. The model brackets every
// use of a unit's weights with acquire/release and reports when a micro-batch's contribution to a unit's
// gradient is complete. The plain implementation reads flat buffers; ZeRO-3 gathers on acquire and frees on
// release; data parallelism launches bucket reductions from grads_done.
#pragma once

#include "common/core/tensor.h"

namespace us {

enum class Pass { forward, backward };

class ParamAccess {
public:
    virtual ~ParamAccess() = default;
    virtual void acquire(int unit, Pass pass) {}
    virtual void release(int unit, Pass pass) {}
    virtual Tensor weights(int unit) = 0;  // valid between acquire and release
    virtual Tensor grads(int unit) = 0;    // where this micro-batch's gradients of the unit accumulate
    virtual void grads_done(int unit) {}
};

}  // namespace us
