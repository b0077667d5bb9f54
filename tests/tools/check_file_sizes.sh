#!/usr/bin/env bash
# One concept per file, as a test: no source file in app/ or profiler/ longer than 400 lines (docs/architecture.md).
# Prints each one that is, with its length; exits 1 if any.
#   tests/tools/check_file_sizes.sh [SOURCE_DIR]
set -uo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 2
limit=400
long=$(find app profiler \( -name '*.cpp' -o -name '*.h' \) -print0 | xargs -0 wc -l | awk -v n=$limit '$2 != "total" && $1 > n')
if [ -n "$long" ]; then
  echo "file sizes: over $limit lines (split by concern):"
  echo "$long"
  exit 1
fi
echo "file sizes: every source in app/ and profiler/ is at most $limit lines"
