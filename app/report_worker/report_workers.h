// `mpirun -n W ultrascope report RUN` (or srun): the workers split the run's rank files, each digests its share
// where the files are (a cluster's shared file system), and rank 0 gathers the digests and writes the report
// (docs/blame.md). One process, started by hand, is a run of one worker and needs no MPI. Only the worker program
// (ultrascope-report-worker, main.cpp here) links MPI; `ultrascope report` hands over to it under a launcher.
#pragma once

#include "profiler/runs/run_digests.h"

namespace us::app {

struct ReportWorkers {
    int rank = 0, size = 1;
    bool mpi = false;  // MPI_Init was called (and MPI_Finalize is due)
};

// Several processes of one launch (mpirun's, Hydra's, srun's environment says so): MPI_Init, and who this one is.
ReportWorkers start_report_workers();
void stop_report_workers(const ReportWorkers& w);
// A worker that failed: the whole launch ends with `code` (nobody waits in a gather for it).
void abort_report_workers(const ReportWorkers& w, int code);

// Every worker's digests, errors and warnings at rank 0 (in rank order); the other workers get an empty result.
// A rank that two workers' files both claim is refused there, naming both files.
prof::RunDigests gather_digests(prof::RunDigests mine, const ReportWorkers& w);

}  // namespace us::app
