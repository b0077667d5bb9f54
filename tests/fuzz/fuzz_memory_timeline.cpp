// libFuzzer target: arbitrary bytes as the memory profiler's timeline export and as a Kineto trace's [memory] events
// with their ops, then the two compared. Anything but a clean UserError (a crash, a hang, a sanitizer report, memory
// past the fuzzer's limit) is a finding.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_memory_ops.h"
#include "profiler/import/kineto_parse.h"
#include "profiler/import/memory_category_agreement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    us::prof::MemoryTimeline timeline;
    us::prof::KinetoMemoryEvents events;
    try {
        timeline = us::prof::parse_memory_timeline(bytes, "fuzz input");
        (void)us::prof::timeline_peaks(timeline);
    } catch (const us::UserError&) {
        timeline.times_us = {0, 0, 5};
        timeline.bytes.assign(3 * us::prof::kProfilerCategories, 64);
    }
    try {
        us::prof::ByteSource source(bytes, "fuzz input");
        events = us::prof::memory_events_of(us::prof::parse_kineto(source), 0);
    } catch (const us::UserError&) {
    }
    for (int device : {-1, 0})
        (void)us::prof::compare_categories(events, timeline, device, us::prof::AgreementGrouping::grouped);
    return 0;
}
