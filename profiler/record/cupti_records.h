// Copying CUPTI's activity records (CUDA 13 layouts: CUpti_ActivityKernel10 ...) into the plain structs the
// CUDA-free translation layer reads (device_activity.h). CUDA builds only (target us_profiler_cupti).
#pragma once

#include <cupti.h>

#include "profiler/record/device_activity.h"

namespace us::prof {

// Hands one record to the translator; records of kinds it does not use (runtime and driver calls, whose external
// correlation records are what counts) are skipped.
void translate_cupti_record(const CUpti_Activity* record, DeviceActivityTranslator& translator);

}  // namespace us::prof
