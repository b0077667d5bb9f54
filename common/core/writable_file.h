// Whether a file can be written at a path, asked before the work that would write it (a checkpoint after the last
// step): the trainer's rank 0 asks for --save before step 1, and `ultrascope run` asks on this machine before it
// launches anything, where its ranks run here too.
#pragma once

#include <string>

namespace us {

// "" where a file can be created at `path` (a temporary file beside it is made and removed; a leftover one counts
// as writable: its folder takes files), else why not in words ("it is a folder: give a file's name", the error).
std::string why_not_writable_file(const std::string& path);

}  // namespace us
