// A hung job's dumps on disk: one Flight Recorder file per rank, named as PyTorch names them
// (<TORCH_FR_DUMP_TEMP_FILE><rank>, by default ~/.cache/torch/comm_lib_trace_rank_<rank>) or any other way, host
// names included; given as files, folders or globs. They are read on every core, and a file that cannot be read,
// a rank dumped twice or dumps of another job are named and left out: the rest is still analysed.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "profiler/flight/flight_dump.h"

namespace us::hang {

// The files `paths` name: files as given, every dump in a folder (files that look like dumps: flight_reader.h),
// and glob patterns (*, ?, [..]) expanded. Throws UserError when a path names nothing.
std::vector<std::string> find_dump_files(const std::vector<std::string>& paths);

// Whether `path` (a file, a folder or a glob) names Flight Recorder dumps: the file, one of the glob's first matches or
// one of the folder's first files looks like one. Commands and the GUI use it to choose the dumps' report and view.
bool names_flight_dumps(const std::string& path);

// What a file name says of its rank and host: the number after "rank" (rank_12, rank-12, rank12), else the name's
// last number; the host is what else the name holds that is not PyTorch's default prefix words
// ("node-a_rank_3" -> host "node-a"). rank -1 when the name carries none.
struct DumpNameParts {
    int rank = -1;
    std::string host;
};
DumpNameParts dump_name_parts(const std::string& path);

struct DumpSet {
    std::vector<flight::FlightDump> dumps;  // one per rank, in rank order
    std::vector<std::string> left_out;      // each file left out, and why
    std::vector<int> another_jobs_ranks;    // ranks whose only file was left out as another job's (sorted)
    size_t files = 0;                       // files named
};

// How far a read of many dumps got, and a way to stop it between files (the GUI reads off the frame).
struct DumpReadProgress {
    std::atomic<size_t> files_done{0};
    std::atomic<bool> cancel{false};
};

// Reads `files` on `threads` threads (0: every core). Every dump gets a rank (its own, else its file name's) and a
// host where either says one. With `progress`, counts the files read and stops early once it is cancelled (the
// set is then incomplete: the caller drops it).
DumpSet load_dumps(const std::vector<std::string>& files, unsigned threads = 0, DumpReadProgress* progress = nullptr);

// The same over dumps already read (the engine's, kept in a trace): ranks checked, duplicates and other jobs named.
DumpSet check_dumps(std::vector<flight::FlightDump> dumps);

}  // namespace us::hang
