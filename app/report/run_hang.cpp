// A run's Flight Recorder dumps, from its trace, analysed (run_hang.h).
#include "app/report/run_hang.h"

#include <fmt/format.h>

#include "common/core/check.h"
#include "profiler/hang/flight_reader.h"

namespace us::app {

std::optional<RunHang> run_hang_of(const prof::TraceStore& store) {
    std::vector<flight::FlightDump> dumps;
    std::vector<std::string> unreadable;
    for (const int rank : store.ranks()) {
        const prof::RankTrace* t = store.rank(rank);
        if (!t || t->flight_dump.empty()) continue;
        const std::string source = fmt::format("rank {}'s dump in the trace", rank);
        try {
            dumps.push_back(hang::read_flight_dump(t->flight_dump, source));
        } catch (const UserError& e) {  // one bad dump leaves the others analysed
            unreadable.push_back(fmt::format("left out: {}", e.what()));
        }
    }
    if (dumps.empty() && unreadable.empty()) return std::nullopt;
    RunHang h;
    const size_t files = dumps.size() + unreadable.size();
    h.dumps = hang::check_dumps(std::move(dumps));
    h.dumps.files = files;
    h.dumps.left_out.insert(h.dumps.left_out.end(), unreadable.begin(), unreadable.end());
    h.analysis = hang::analyze_hang(h.dumps);
    return h;
}

}  // namespace us::app
