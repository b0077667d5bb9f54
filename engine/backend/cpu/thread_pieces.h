// [0, n) cut into one contiguous piece per thread of one parallel region, as a static schedule cuts it. Each thread
// calls a kernel's row or range function once (isa_clones.h: one ifunc call per piece, not per element), and the
// fixed pieces keep any per-thread partial sum the same from run to run.
#pragma once

#include <omp.h>

#include <cstdint>

namespace us::cpu {

// fn(thread, begin, end) on every thread of the region, also when its piece is empty.
template <typename Fn>
void for_each_thread_piece(int64_t n, int threads, Fn&& fn) {
#pragma omp parallel num_threads(threads)
    {
        const int64_t id = omp_get_thread_num(), team = omp_get_num_threads();
        fn(int(id), n * id / team, n * (id + 1) / team);
    }
}

}  // namespace us::cpu
