// Where in the engine a collective was called: a short stack of the engine's phases (the trainer's step, the
// pipeline's forward of a micro-batch, data parallelism's gradient reduction ...) that scopes at the call sites
// push, and that the flight recorder copies into each entry as pointers to static sites (no allocation per op), so
// that a hung run's dump names the engine function and line each rank waits in, with its step and micro-batch.
#pragma once

#include <cstdint>

namespace us {

// What a frame's name carries besides the function when a dump is written: the step, or the step and micro-batch
// the entry was recorded in.
enum class FrameDetail : uint8_t { none, step, micro_batch };

struct FlightSite {
    const char* name;  // "DataParallel::reduce_gradients"
    const char* file;  // __FILE__ (made relative to the source tree when written)
    int line;
    FrameDetail detail;
};

// This thread's open scopes, outermost first. Deeper nests than kCapacity keep counting but are not recorded.
struct FlightFrameStack {
    static constexpr int kCapacity = 16;
    const FlightSite* sites[kCapacity];
    int depth = 0;
};

inline FlightFrameStack& flight_frames() {
    thread_local FlightFrameStack stack;
    return stack;
}

class FlightFrameScope {
public:
    explicit FlightFrameScope(const FlightSite* site) {
        FlightFrameStack& s = flight_frames();
        if (s.depth < FlightFrameStack::kCapacity) s.sites[s.depth] = site;
        ++s.depth;
    }
    ~FlightFrameScope() { --flight_frames().depth; }
    FlightFrameScope(const FlightFrameScope&) = delete;
    FlightFrameScope& operator=(const FlightFrameScope&) = delete;
};

}  // namespace us

#define US_FLIGHT_CONCAT_(a, b) a##b
#define US_FLIGHT_CONCAT(a, b) US_FLIGHT_CONCAT_(a, b)
// US_FLIGHT_FRAME("DataParallel::reduce_gradients", ::us::FrameDetail::none): the collectives called in this scope
// carry the frame.
#define US_FLIGHT_FRAME(name, detail)                                                                                \
    static constexpr ::us::FlightSite US_FLIGHT_CONCAT(us_flight_site_, __LINE__){name, __FILE__, __LINE__, detail}; \
    ::us::FlightFrameScope US_FLIGHT_CONCAT(us_flight_scope_, __LINE__)(&US_FLIGHT_CONCAT(us_flight_site_, __LINE__))
