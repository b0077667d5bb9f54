// Inferred against measured memory categories on one run (memory_category_agreement.h).
#include "profiler/import/memory_category_agreement.h"

#include <algorithm>
#include <vector>

namespace us::prof {

namespace {

using Bytes = std::array<int64_t, kProfilerCategories>;

size_t group_of(size_t c, AgreementGrouping g) {
    return g == AgreementGrouping::grouped && c == size_t(ProfilerCategory::autograd_detail)
               ? size_t(ProfilerCategory::gradient)
               : c;
}

// Σ_g min(inferred_g, measured_g) and max(Σ inferred, Σ measured) for one moment.
std::pair<int64_t, int64_t> overlap(const Bytes& inferred, const Bytes& measured, AgreementGrouping g) {
    Bytes a{}, b{};
    int64_t sa = 0, sb = 0;
    for (size_t c = 0; c < kProfilerCategories; ++c) {
        a[group_of(c, g)] = add_saturated(a[group_of(c, g)], std::max<int64_t>(0, inferred[c]));
        b[group_of(c, g)] = add_saturated(b[group_of(c, g)], std::max<int64_t>(0, measured[c]));
    }
    int64_t common = 0;
    for (size_t c = 0; c < kProfilerCategories; ++c)
        common = add_saturated(common, std::min(a[c], b[c])), sa = add_saturated(sa, a[c]),
        sb = add_saturated(sb, b[c]);
    return {common, std::max(sa, sb)};
}

}  // namespace

CategoryAgreement compare_categories(const KinetoMemoryEvents& inferred, const MemoryTimeline& measured, int device,
                                     AgreementGrouping grouping) {
    CategoryAgreement out;
    const size_t rows = measured.size();
    out.rows = rows;
    if (rows == 0) return out;
    auto row = [&](size_t r) {
        Bytes b{};
        for (size_t c = 0; c < kProfilerCategories; ++c) b[c] = measured.at(r, ProfilerCategory(c));
        return b;
    };
    // torch puts the tensors alive before profiling in a row of their own, at the first event's time: the bytes the
    // trace's events cannot explain. Everything is compared above them.
    const bool preexisting_row = rows > 1 && measured.times_us[0] == measured.times_us[1];
    const Bytes base = preexisting_row ? row(0) : Bytes{};
    std::vector<const KinetoMemoryEvent*> events;
    for (const auto& e : inferred.events)
        if (e.device == device && e.bytes != 0) events.push_back(&e);
    out.events_used = events.size();

    Bytes now{};
    size_t next = 0;
    double num = 0, den = 0;
    int64_t peak_total = -1;
    for (size_t r = preexisting_row ? 1 : 0; r < rows; ++r) {
        for (; next < events.size() && inferred.profiler_time_us(*events[next]) <= measured.times_us[r]; ++next) {
            const KinetoMemoryEvent& e = *events[next];
            if (e.bytes > 0 || e.allocated_in_trace)
                now[size_t(e.category)] = add_saturated(now[size_t(e.category)], e.bytes);
        }
        Bytes m = row(r);
        int64_t total = 0;
        for (size_t c = 0; c < kProfilerCategories; ++c) m[c] = std::max<int64_t>(0, m[c] - base[c]), total += m[c];
        const auto [common, larger] = overlap(now, m, grouping);
        const double w = r + 1 < rows ? double(measured.times_us[r + 1] - measured.times_us[r]) : 0.0;
        num += w * double(common), den += w * double(larger);
        if (total > peak_total) {
            peak_total = total;
            out.at_peak = larger > 0 ? double(common) / double(larger) : 1.0;
            out.measured_peak_bytes = total;
            out.inferred_bytes_at_peak = 0;
            for (int64_t v : now)
                out.inferred_bytes_at_peak = add_saturated(out.inferred_bytes_at_peak, std::max<int64_t>(0, v));
        }
    }
    out.byte_time = den > 0 ? num / den : 0.0;

    // Per allocation: the category whose bytes rose by exactly its size at its microsecond.
    std::vector<Bytes> rise(rows, Bytes{});
    for (size_t r = 1; r < rows; ++r)
        if (!(preexisting_row && r == 0))
            for (size_t c = 0; c < kProfilerCategories; ++c)
                rise[r][c] = measured.at(r, ProfilerCategory(c)) - measured.at(r - 1, ProfilerCategory(c));
    if (!preexisting_row) rise[0] = row(0);
    for (const KinetoMemoryEvent* e : events) {
        if (e->bytes <= 0) continue;
        const int64_t t = inferred.profiler_time_us(*e);
        const auto [lo, hi] = std::equal_range(measured.times_us.begin(), measured.times_us.end(), t);
        size_t column = kProfilerCategories;
        for (auto it = lo; it != hi && column == kProfilerCategories; ++it) {
            const size_t r = size_t(it - measured.times_us.begin());
            if (preexisting_row && r == 0) continue;
            for (size_t c = 0; c < kProfilerCategories; ++c)
                if (rise[r][c] == e->bytes) {
                    rise[r][c] = 0, column = c;
                    break;
                }
        }
        out.allocated[size_t(e->category)][column] =
            add_saturated(out.allocated[size_t(e->category)][column], e->bytes);
    }
    return out;
}

}  // namespace us::prof
