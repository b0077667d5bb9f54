#!/usr/bin/env bash
# The repository's .clang-format, as a test: every tracked C++ and CUDA source must be formatted already (prints each
# file that is not, and how to fix it; exits 1). Formatting differs between clang-format versions, so the check runs
# only with the major version the tree was formatted with (Debian 12's, 14) and otherwise exits 77, which ctest
# reports as skipped, with the reason.
#   tests/tools/check_format.sh [SOURCE_DIR]
#   fix: git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format-14 -i
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 2
want_major=14
tool=""
for candidate in clang-format-$want_major clang-format; do
  if command -v "$candidate" > /dev/null; then
    major=$("$candidate" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
    if [ "$major" = "$want_major" ]; then tool=$candidate; break; fi
  fi
done
if [ -z "$tool" ]; then
  echo "US_TEST_SKIPPED: clang-format $want_major is not installed (apt-get install clang-format on Debian 12;" \
       "./quickstart.sh does it): the format check did not run"
  exit 77
fi
if [ -d .git ] || git rev-parse --git-dir > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
else
  mapfile -t files < <(find common engine profiler app tests -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh')
fi
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run -Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "format: ${#bad[@]} file(s) differ from .clang-format ($tool):"
  printf '  %s\n' "${bad[@]}"
  echo "fix: $tool -i FILE (or every file: git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs $tool -i)"
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format ($tool)"
