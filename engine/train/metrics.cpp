#include "engine/train/metrics.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/core/check.h"

namespace us {

MetricsWriter::MetricsWriter(const std::string& path) {
    m_file = std::fopen(path.c_str(), "w");
    US_CHECK_INPUT(m_file, "cannot create --metrics-out file '{}': {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
    if (m_file) std::fclose(m_file);
}

std::string metrics_json_line(const StepMetrics& m) {
    nlohmann::ordered_json by_category = nlohmann::ordered_json::object();
    for (int c = 0; c < kMemCategoryCount; ++c) by_category[std::string(kMemCategoryNames[c])] = m.memory.peak[c];
    nlohmann::ordered_json j = {{"step", m.step},
                                {"loss", m.loss},
                                {"lr", m.lr},
                                {"grad_norm", m.grad_norm},
                                {"tokens", m.tokens},
                                {"step_ms", m.step_ms},
                                {"tokens_per_s", m.tokens_per_s},
                                {"mem_peak_bytes", m.memory.total_peak},
                                {"mem_peak_by_category", by_category}};
    if (!m.moe_routed.empty()) {
        j["moe_aux_loss"] = m.aux_loss;
        j["moe_balance"] = m.moe_balance;
        j["moe_dropped"] = m.moe_dropped;
        nlohmann::ordered_json layers = nlohmann::ordered_json::object();
        for (const auto& [layer, routed] : m.moe_routed) layers[std::to_string(layer)] = routed;
        j["moe_routed"] = layers;
    }
    return j.dump();
}

void MetricsWriter::write(const StepMetrics& m) {
    const std::string line = metrics_json_line(m);
    std::fprintf(m_file, "%s\n", line.c_str());
    std::fflush(m_file);
}

}  // namespace us
