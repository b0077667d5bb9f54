#!/usr/bin/env bash
# Every repository path a comment or a doc names exists: a file moved or renamed must take its mentions along
# (a comment named a memory-categories file under app/cli long after it moved). Checks paths under the top-level folders
# with an extension (app/report/input_kind.h, docs/diff.md); a placeholder (NAME, <...>, *) is not a path.
#   tests/tools/check_file_refs.sh [SOURCE_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 2
missing=$(
  git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' '*.md' '*.sh' '*.py' '*CMakeLists.txt' |
    xargs grep -ohE "(^|[^A-Za-z0-9_./-])(app|profiler|engine|common|tests|docs|assets)/[A-Za-z0-9_/.+-]*[A-Za-z0-9_]\.(h|cpp|cu|cuh|md|py|sh|json)\b" |
    sed -E 's/^[^a-z]//' | grep -v NAME | sort -u |
    while read -r f; do [ -e "$f" ] || echo "$f"; done
)
if [ -n "$missing" ]; then
  echo "file references: these paths are named in comments or docs but do not exist (update the mention):"
  for f in $missing; do
    echo "  $f: $(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' '*.md' '*.sh' '*.py' | xargs grep -lF "$f" | head -3 | tr '\n' ' ')"
  done
  exit 1
fi
echo "file references: every repository path named in comments and docs exists"
