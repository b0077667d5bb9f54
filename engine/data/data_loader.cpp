#include "engine/data/data_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/core/check.h"
#include "common/core/rng.h"

namespace us {

TokenDataset TokenDataset::from_file(const std::string& path) {
    std::error_code ec;  // a folder opens as a stream of nothing: said as what it is
    US_CHECK_INPUT(!std::filesystem::is_directory(path, ec), "--data '{}' is a folder: give a text file", path);
    std::ifstream in(path, std::ios::binary);
    US_CHECK_INPUT(in.good(), "cannot read data file '{}': check the path given with --data", path);
    std::ostringstream ss;
    ss << in.rdbuf();
    US_CHECK_INPUT(!in.bad(), "error while reading data file '{}'", path);
    std::string bytes = std::move(ss).str();
    US_CHECK_INPUT(!bytes.empty(), "data file '{}' is empty: give a text file with --data", path);
    return from_bytes(std::move(bytes), path);
}

TokenDataset TokenDataset::from_bytes(std::string bytes, std::string name) {
    TokenDataset d;
    d.m_bytes = std::move(bytes);
    d.m_name = std::move(name);
    return d;
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
    uint64_t s = seed;
    Rng rng(splitmix64(s) ^ (uint64_t(epoch) * 0xd1342543de82ef95ull));
    for (int64_t i = n - 1; i > 0; --i) {
        const int64_t j = int64_t(rng.next_below(uint64_t(i + 1)));
        std::swap(perm[size_t(i)], perm[size_t(j)]);
    }
    return perm;
}

DataLoader::DataLoader(const TokenDataset& data, const DataLayout& layout, uint64_t seed)
    : m_data(data), m_layout(layout), m_seed(seed) {
    const int64_t T = layout.seq;
    m_windows = data.size() > 1 ? (data.size() - 1) / T : 0;
    US_CHECK_INPUT(m_windows >= layout.global_batch(),
                   "data file '{}' is too short: {} bytes give {} windows of --seq {} + 1 bytes, but one global "
                   "batch needs {} (dp {} x grad-accum {} x batch {}). Use a longer file, or a smaller --seq, "
                   "--batch or --grad-accum",
                   data.name(), data.size(), m_windows, T, layout.global_batch(), layout.dp_size, layout.micro_batches,
                   layout.micro_batch);
}

int64_t DataLoader::window_start(int64_t g) {
    const int64_t epoch = g / m_windows;
    if (epoch != m_epoch) {
        m_perm = epoch_permutation(m_windows, m_seed, epoch);
        m_epoch = epoch;
    }
    return m_perm[size_t(g % m_windows)] * m_layout.seq;
}

void DataLoader::fill(int64_t step, int micro_batch, int32_t* tokens, int32_t* targets) {
    const int64_t B = m_layout.micro_batch, T = m_layout.seq, dp = m_layout.dp_size;
    const int64_t base = step * m_layout.global_batch() + int64_t(micro_batch) * dp * B + m_layout.dp_rank * B;
    for (int64_t b = 0; b < B; ++b) {
        const uint8_t* w = m_data.data() + window_start(base + b);
        for (int64_t t = 0; t < T; ++t) {
            tokens[b * T + t] = w[t];
            targets[b * T + t] = w[t + 1];
        }
    }
}

}  // namespace us
