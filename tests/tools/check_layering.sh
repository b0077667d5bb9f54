#!/usr/bin/env bash
# The layering, as a test: data flows engine -> recorder -> transport -> store -> analysis -> views, and includes
# may only point down that flow (docs/architecture.md). Prints every include that breaks a rule; exits 1 if any.
#   tests/tools/check_layering.sh [SOURCE_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 2
broken=0
# rule NAME DIRS PATTERN: no file under DIRS includes a header matching PATTERN
rule() {
  local name=$1 dirs=$2 pattern=$3
  local hits
  hits=$(grep -rnE "^#include \"($pattern)" $dirs --include='*.h' --include='*.cpp' --include='*.cu' || true)
  if [ -n "$hits" ]; then
    echo "layering: $name:"
    echo "$hits" | sed 's/^/  /'
    broken=1
  fi
}
rule "the engine and the profiler never include the app" "engine profiler" "app/"
rule "the profiler reads the engine's core and pipeline schedules only (never backends, MPI, models or training)" \
  "profiler" "engine/(backend|comm|model|optim|train|data|cpu|cuda)/"
rule "the trace store, transport and analysis never include the recorder (profiler/event.h is the contract)" \
  "profiler/trace profiler/transport profiler/analysis" "profiler/record/"
rule "the GUI never includes the engine's backends, communicators, models or optimizers" \
  "app/gui" "engine/(backend|comm|model|optim|cpu|cuda)/"
rule "analysis never includes the views" "profiler" "app/gui/"
# The viewer links the settings library only (us_config; tests/tools/check_viewer_links.sh checks the binary).
app_engine=$(grep -rnE '^#include "engine/' app --include='*.h' --include='*.cpp' |
  grep -vE '"engine/(core/|train/config\.h|train/cli\.h|model/gpt_config\.h|parallel/pipeline_schedule\.h)' || true)
if [ -n "$app_engine" ]; then
  echo "layering: the app includes only the engine's core, its settings (train/config.h, train/cli.h,"
  echo "  model/gpt_config.h) and the pipeline schedules:"
  echo "$app_engine" | sed 's/^/  /'
  broken=1
fi
if [ $broken = 0 ]; then echo "layering: ok (engine -> recorder -> transport -> store -> analysis -> views)"; fi
exit $broken
