// --metrics-out: one JSON object per step (step, loss, lr, grad_norm, tokens, step_ms, tokens_per_s,
// mem_peak_bytes, mem_peak_by_category), flushed per line so a crashed run keeps what it did.
#pragma once

#include <cstdio>
#include <string>

#include "engine/train/trainer.h"

namespace us {

class MetricsWriter {
public:
    explicit MetricsWriter(const std::string& path);  // UserError when the file cannot be created
    ~MetricsWriter();
    MetricsWriter(const MetricsWriter&) = delete;
    MetricsWriter& operator=(const MetricsWriter&) = delete;
    void write(const StepMetrics& m);

private:
    std::FILE* m_file = nullptr;
};

std::string metrics_json_line(const StepMetrics& m);

}  // namespace us
