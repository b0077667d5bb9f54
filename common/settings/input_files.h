// The files a run reads (--load, --data), checked before anything is written: the trainer opens its trace before it
// reads them, and `ultrascope run` writes its trace as it launches, so a mistyped path must not cost the trace an
// earlier run left there. Both ask here.
#pragma once

#include <string>
#include <utility>

#include "common/core/readable_file.h"
#include "common/settings/config.h"

namespace us {

// "" where every input file of `cfg` can be read (or is a pipe), else "cannot read --data 'x': no such file".
inline std::string unreadable_input(const TrainConfig& cfg) {
    for (const auto& [flag, path] : {std::pair{"--load", &cfg.load}, std::pair{"--data", &cfg.data}})
        if (const std::string why = path->empty() ? "" : why_not_readable_file(*path); !why.empty())
            return std::string("cannot read ") + flag + " '" + *path + "': " + why;
    return "";
}

}  // namespace us
