// Deterministic random numbers, identical on every platform: SplitMix64 to expand a seed, xoshiro256** for the
// stream (Blackman & Vigna). Weight init and the data order are functions of the seed alone.
#pragma once

#include <cmath>
#include <cstdint>

namespace us {

inline uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

class Rng {
public:
    explicit Rng(uint64_t seed) {
        uint64_t s = seed;
        for (auto& word : m_s) word = splitmix64(s);
    }

    uint64_t next_u64() {
        const uint64_t result = rotl(m_s[1] * 5, 7) * 9;
        const uint64_t t = m_s[1] << 17;
        m_s[2] ^= m_s[0];
        m_s[3] ^= m_s[1];
        m_s[1] ^= m_s[2];
        m_s[0] ^= m_s[3];
        m_s[2] ^= t;
        m_s[3] = rotl(m_s[3], 45);
        return result;
    }

    // Uniform in [0, bound) without modulo bias (Lemire's method with rejection).
    uint64_t next_below(uint64_t bound) {
        __uint128_t m = __uint128_t(next_u64()) * bound;
        uint64_t low = uint64_t(m);
        if (low < bound) {
            const uint64_t threshold = (0 - bound) % bound;
            while (low < threshold) {
                m = __uint128_t(next_u64()) * bound;
                low = uint64_t(m);
            }
        }
        return uint64_t(m >> 64);
    }

    // Uniform double in [0, 1) from the top 53 bits.
    double next_double() { return double(next_u64() >> 11) * 0x1.0p-53; }

    // Standard normal by Box-Muller (one value per call; the pair's second half is discarded for simplicity).
    double next_normal() {
        double u1 = next_double();
        while (u1 <= 0.0) u1 = next_double();
        const double u2 = next_double();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t m_s[4];
};

}  // namespace us
