#!/usr/bin/env bash
# Regenerates the README's screenshots with the product's own screenshot mode, under Xvfb.
#   docs/images/make_screenshots.sh [build]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
shot() { xvfb-run -a -s "-screen 0 1280x800x24" "$build/bin/ultrascope" "$@"; rm -f "${@: -1}.json"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The whole window on a live 2-rank data-parallel run of the small preset.
xvfb-run -a -s "-screen 0 1280x800x24" "$build/bin/ultrascope" --exit-when-done --preset small --steps 12 \
  --screenshot "$here/ultrascope-live-dp2.png"
# One view at a time, from traces of ZeRO-3 and of the default run.
"$build/bin/ultrascope" run -n 2 --dp 2 --zero 3 --bucket-mb 2 --preset small --steps 8 --trace "$work/zero3.ustrace" >/dev/null
xvfb-run -a -s "-screen 0 1280x800x24" "$build/bin/ultrascope" "$work/zero3.ustrace" --view memory \
  --screenshot "$here/memory-zero3.png"
xvfb-run -a -s "-screen 0 1280x800x24" "$build/bin/ultrascope" "$work/zero3.ustrace" --view timeline \
  --screenshot "$here/timeline-zero3.png"
rm -f "$here"/*.png.json
