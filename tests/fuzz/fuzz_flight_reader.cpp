// libFuzzer target: arbitrary bytes as a Flight Recorder dump (pickle or JSON), through the plain-data reader, the
// flat dump and the hang analysis of it beside two well-formed ranks (so alignment, p2p waits and roots run on what
// the bytes hold). Anything but a clean UserError (a crash, a hang, a sanitizer report, memory past the fuzzer's
// limit) is a finding.
#include <cstdint>
#include <string_view>

#include "common/core/check.h"
#include "profiler/hang/flight_reader.h"
#include "profiler/hang/hang_analysis.h"
#include "profiler/hang/hang_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        us::flight::FlightDump dump = us::hang::read_flight_dump(bytes, "fuzz_rank_1");
        std::vector<us::flight::FlightDump> dumps;
        for (int r : {0, 2}) {
            us::flight::FlightDump other = dump;
            other.source = "fuzz_rank_" + std::to_string(r);
            other.rank = r;
            if (r == 2 && !other.entries.empty()) other.entries.pop_back();  // one rank behind
            dumps.push_back(std::move(other));
        }
        dumps.push_back(std::move(dump));
        const us::hang::HangAnalysis a = us::hang::analyze_hang(us::hang::check_dumps(std::move(dumps)));
        (void)us::hang::format_hang(a);
        (void)us::hang::hang_json(a).dump(-1, ' ', false,
                                          nlohmann::json::error_handler_t::replace);  // as the report prints it
    } catch (const us::UserError&) {
    }
    return 0;
}
