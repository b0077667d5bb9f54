// Byte-level tokens and the deterministic data order (docs/data-order.md has the exact rule, so that another
// implementation can reproduce a run). A corpus of n bytes is cut into W = floor((n - 1) / T) windows of T + 1
// bytes starting at multiples of T; each epoch visits the windows in a seeded Fisher-Yates permutation; global
// sample g of the run is window perm_e[g mod W] of epoch e = g div W. Step s, micro-batch m, data-parallel rank
// r and row b read global sample g = s*(M*dp*B) + m*(dp*B) + r*B + b, so dp ranks x micro-batch B is exactly a
// single rank with micro-batch dp*B.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace us {

class TokenDataset {
public:
    // Reads the whole file; UserError when it is missing, unreadable or empty.
    static TokenDataset from_file(const std::string& path);
    static TokenDataset from_bytes(std::string bytes, std::string name);
    int64_t size() const { return int64_t(m_bytes.size()); }
    const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(m_bytes.data()); }
    const std::string& name() const { return m_name; }

private:
    std::string m_bytes;
    std::string m_name;
};

struct DataLayout {
    int seq = 128;          // T
    int micro_batch = 8;    // B
    int micro_batches = 1;  // M (gradient accumulation steps)
    int dp_size = 1;
    int dp_rank = 0;
    int64_t global_batch() const { return int64_t(micro_batch) * micro_batches * dp_size; }
};

// Where the micro-batches of a step come from: the data loader below, or in tests a recorded list.
class BatchSource {
public:
    virtual ~BatchSource() = default;
    // Fills (B,T) inputs and targets for step s (0-based) and micro-batch m of this rank.
    virtual void fill(int64_t step, int micro_batch, int32_t* tokens, int32_t* targets) = 0;
};

class DataLoader final : public BatchSource {
public:
    // UserError when the corpus holds fewer windows than one global batch.
    DataLoader(const TokenDataset& data, const DataLayout& layout, uint64_t seed);

    int64_t windows() const { return m_windows; }
    // Window start (byte offset) of global sample g.
    int64_t window_start(int64_t g);
    void fill(int64_t step, int micro_batch, int32_t* tokens, int32_t* targets) override;

private:
    const TokenDataset& m_data;
    DataLayout m_layout;
    uint64_t m_seed;
    int64_t m_windows;
    int64_t m_epoch = -1;
    std::vector<int64_t> m_perm;
};

// The permutation of [0, n) for (seed, epoch): Fisher-Yates from the top, Rng(splitmix(seed) ^ epoch constant).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace us
