// The headless commands of `ultrascope`. Each takes its own arguments and returns the process exit code.
#pragma once

#include <cstddef>
#include <string>

namespace us::app {

int run_command(int argc, char** argv);          // ultrascope run [-n RANKS] [ultrascope-train flags]
int report_command(int argc, char** argv);       // ultrascope report TRACE [--json]
int diff_command(int argc, char** argv);         // ultrascope diff A B [--json]: what changed between two runs
int hang_report_command(int argc, char** argv);  // ultrascope report DUMPS [--json]: a hung job's Flight Recorder
int export_command(int argc, char** argv);       // ultrascope export TRACE --chrome OUT.json[.gz]
int predict_command(int argc, char** argv);      // ultrascope predict [model and parallel flags]
int plan_command(int argc, char** argv);         // ultrascope plan [--model M] [--gpu G] [--gpus N] [layout flags]
int calibrate_command(int argc, char** argv);    // ultrascope calibrate [--out FILE]: this machine's costs
int lesson_command(int argc, char** argv);       // ultrascope lesson --list | NAME [--check]

}  // namespace us::app
