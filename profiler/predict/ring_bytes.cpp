// bytes_sent (ring_bytes.h): the ring algorithms' bytes per rank, by collective.
#include "profiler/predict/ring_bytes.h"

namespace us::predict {

double bytes_sent(prof::OpClass op, double bytes, int n) {
    if (n <= 1 && op != prof::OpClass::send) return 0.0;
    const double ring = double(n - 1) / double(n);
    switch (op) {
        case prof::OpClass::all_reduce:
            return 2.0 * bytes * ring;
        case prof::OpClass::all_gather:
        case prof::OpClass::reduce_scatter:
        case prof::OpClass::broadcast:
            return bytes * ring;
        case prof::OpClass::all_to_all:  // its span records what went to the other ranks
        case prof::OpClass::send:
            return bytes;
        default:
            return 0.0;
    }
}

}  // namespace us::predict
