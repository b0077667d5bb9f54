#!/usr/bin/env bash
# The layering, as a test (docs/architecture.md draws it). common/ lies beneath everything; the engine and the app
# stand on it side by side and never include each other; the profiler stands on it too and includes neither; the
# engine reaches only the profiler's recording side. Inside each top-level folder the sub-folders form an order,
# and a file includes only from sub-folders below its own. No exceptions: prints every include that breaks a rule,
# and every source file in no layer; exits 1 if any.
#   tests/tools/check_layering.sh [SOURCE_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 2
for top in common engine profiler app; do
  [ -d "$top" ] || { echo "layering: no $top/ under $src"; exit 2; }
done
broken=0
sources=(--include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh')
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"'

report() {  # report RULE HITS
  if [ -n "$2" ]; then
    echo "layering: $1:"
    echo "$2" | sed 's/^/  /'
    broken=1
  fi
}

# ---- between the top-level folders: one rule per arrow
# never DIRS PATTERN RULE: no file under DIRS includes a header whose path matches PATTERN
never() {
  report "$3" "$(grep -rnE "${include_re}($2)" $1 "${sources[@]}" || true)"
}
never "common" "engine/|profiler/|app/" "common/ is the bottom layer: it includes nothing from engine/, profiler/ or app/"
never "profiler" "engine/|app/" "the profiler stands on common/ only: it includes nothing from engine/ or app/"
never "engine" "app/" "the engine never includes the app"
never "engine" "profiler/(trace|predict|analysis|import|snapshot|hang|capture|ondemand)/" \
  "the engine reaches only the profiler's recording side (profiler/event.h, record/, transport/, plain/, flight/)"
never "profiler/transport profiler/plain profiler/flight profiler/trace profiler/predict profiler/analysis profiler/import profiler/snapshot profiler/hang profiler/capture profiler/ondemand" "profiler/record/" \
  "only the engine includes the profiler's recorder (profiler/event.h is the contract the rest reads)"
never "app" "engine/" "the app includes nothing from engine/ (it launches ultrascope-train as a process)"

# ---- inside a top-level folder: an order of layers
# order TOP "LAYER" "LAYER" ...: each LAYER is one or more units (sub-folders or files of TOP, relative to it),
# lowest first. A file belongs to the longest unit that holds it; it may include its own unit and the units of
# lower layers, and no unit of its own layer or above. A source file under TOP in no unit breaks the rule too.
order() {
  local top=$1
  shift
  local spec="" level=0 layer unit
  for layer in "$@"; do
    for unit in $layer; do spec+="$top/$unit $level"$'\n'; done
    level=$((level + 1))
  done
  local listing=""
  for layer in "$@"; do listing+="${listing:+ <- }${layer// /, }"; done
  local hits
  hits=$(
    {
      printf '%s' "$spec" | sed 's/^/U /'
      find "$top" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sed 's/^/F /'
      grep -rnE "${include_re}$top/" "$top" "${sources[@]}" | sed 's/^/I /'
    } | awk -v top="$top" '
      function unit_of(path,   best, u) {
        best = ""
        for (u in level)
          if ((path == u || index(path, u "/") == 1) && length(u) > length(best)) best = u
        return best
      }
      $1 == "U" { level[$2] = $3; next }
      $1 == "F" { if (unit_of($2) == "") print $2 ": in no layer (add its folder to tests/tools/check_layering.sh)"; next }
      $1 == "I" {
        line = substr($0, 3)
        file = line; sub(/:.*/, "", file)
        target = line; sub(/^[^"]*"/, "", target); sub(/".*/, "", target)
        from = unit_of(file); to = unit_of(target)
        if (from == "" || to == "" || from == to) next
        if (level[to] >= level[from]) print line "   (" from " -> " to ")"
      }')
  report "$top/ is layered $listing (a file includes only from layers left of its own)" "$hits"
}
order common "core" "schedule" "settings"
order engine "backend data" "comm" "model" "optim" "parallel" "train" "main.cpp"
order profiler "event.h" "record transport plain ondemand" "trace predict flight" "analysis import snapshot" "runs hang diff" "capture"
order app "plan" "report" "report_worker launch capture" "gui/model" "lesson" "gui/options cli" "gui/state" "gui/widgets" "gui/views" \
  "gui/platform" "main.cpp"

# ---- rules the order alone does not say
never "app/plan app/launch app/lesson" "app/gui/(options|state|widgets|views|platform)/" \
  "plan, launch and lesson include nothing of the GUI (a lesson reads the table of views, gui/model/view_table.h)"
never "app/gui/state" "app/gui/(widgets|views|platform)/" "the GUI's state includes no view and no drawing"
# apart DIR INDEX RULE: no file under DIR includes another file of DIR, except the index header INDEX
apart() {
  report "$3" "$(grep -rnE "${include_re}$1/" "$1" "${sources[@]}" | grep -vF "\"$2\"" || true)"
}
apart "app/gui/views" "app/gui/views/views.h" \
  "views do not include each other (what several views draw lives in gui/widgets/; views.h lists the views)"

if [ $broken = 0 ]; then
  echo "layering: ok (common/ beneath engine/, profiler/ and app/; engine/ and app/ apart; each folder's layers one way;"
  echo "  views apart, the GUI's state beneath its drawing, plan, launch and lesson beneath the GUI)"
fi
exit $broken
