// Writing a capture's folder: the ranks' traces become rank files (rank and world size added, step markers from
// the optimizer steps) in a staging folder beside DIR, renamed into place only when every file is written, so a
// failed capture leaves nothing half-written. The conversion is profiler/capture's finish_capture.
#pragma once

#include <string>
#include <vector>

#include "app/capture/captured_trace.h"

namespace us::app {

struct CaptureWritten {
    std::vector<std::string> rank_files;  // in DIR
    int steps = 0;                        // steps every rank holds (0: not counted)
    bool same_steps = true;
    std::string message;  // what the conversion wants said (steps that differ between ranks ...)
};

// UserError when DIR exists and is not empty: checked before a capture starts, and again when writing.
void check_capture_folder(const std::string& out_dir);
// UserError when DIR exists and is not empty, or cannot be written; DIR then is as it was.
CaptureWritten write_capture(const std::vector<CapturedTrace>& ranks, const std::string& out_dir);

// profiler/capture's finish_capture into `dir`, its summary as the capture reports it (naming `shown_dir`, where the
// folder goes after, when given).
CaptureWritten finish_captured_ranks(const std::vector<CapturedTrace>& ranks, const std::string& dir,
                                     const std::string& shown_dir = "");

}  // namespace us::app
