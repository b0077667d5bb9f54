// The report of a run too large to hold whole, from its ranks' digests only (docs/blame.md): who holds the run back,
// each rank's steady-step figures and HTA's, the op table of the rank most to blame, the groups, and what could
// not be read. What it lacks beside the full report (memory categories, the op tables of every rank, the pipeline's
// own section) needs a rank's spans: `report RUN --rank R` opens the ranks asked for whole.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "profiler/analysis/cross_rank.h"
#include "profiler/runs/run_digests.h"

namespace us::prof {

struct DigestReport {
    CrossRank cross;  // the digests, and the run across them (waits, pipelines, who holds the run back)
    RunDigests run;   // the files read: sizes, cache, warnings and errors (its digests are cross.digests)
    int workers = 1;  // processes that digested the files (mpirun, srun)
};

DigestReport digest_report(RunDigests run, int workers = 1);
nlohmann::json digest_report_json(const DigestReport& r);
std::string format_digest_report(const DigestReport& r);

// The report's exit code: 0, or 3 when some files could not be read (each named in the report); throws UserError
// when no rank could be read.
int digest_report_exit_code(const DigestReport& r);

}  // namespace us::prof
