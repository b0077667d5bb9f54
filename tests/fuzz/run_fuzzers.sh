#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, seeded with real inputs, and prints the executions run and any
# finding; exits non-zero on a finding, 77 (ctest: skipped) when the build has no fuzz targets and says why.
#   tests/fuzz/run_fuzzers.sh TARGET SECONDS BUILD_DIR
# The targets are built by the build itself (`cmake --build BUILD_DIR`): a sub-build of this source tree with clang,
# libFuzzer and the address and undefined-behaviour sanitizers in BUILD_DIR/fuzz/sanitized (tests/CMakeLists.txt,
# tests/fuzz/CMakeLists.txt). What a run finds stays in BUILD_DIR/fuzz for the next one: the corpus it grows
# (corpus-TARGET, seeds included) and the input of any crash, hang or leak (findings-TARGET, named below).
set -euo pipefail
target=$1 seconds=${2:-20} build=${3:-build}
src=$(cd "$(dirname "$0")/../.." && pwd)
out="$build/fuzz"
if [ -n "${US_FUZZ_SKIP:-}" ]; then echo "run_fuzzers: $target skipped: $US_FUZZ_SKIP"; exit 77; fi
bin="$out/sanitized/bin/$target"
if [ ! -x "$bin" ]; then echo "run_fuzzers: $bin is not built (cmake --build $build builds it)" >&2; exit 1; fi
corpus="$out/corpus-$target" findings="$out/findings-$target"
mkdir -p "$corpus" "$findings"
# Seeds: a small valid trace (and a live stream that starts with a hello) written by the test helper.
# (the snapshot reader's seeds are the synthetic snapshots and the hostile set of tests/data/snapshot; targets
# with a folder of their own seeds take those: tests/fuzz/seeds-TARGET)
if [ "$target" = fuzz_pickle_reader ]; then cp "$src"/tests/data/snapshot/*.pickle "$src"/tests/data/snapshot/*.json \
  "$src"/tests/data/snapshot/hostile/* "$corpus"/
elif [ "$target" = fuzz_flight_reader ]; then  # the real dumps of tests/data/hang, pickles and JSON
  for d in "$src"/tests/data/hang/*/; do cp "$d"comm_lib_trace_rank_0 "$corpus/$(basename "$d")_0" 2>/dev/null || true
    cp "$d"json/*.json "$corpus"/ 2>/dev/null || true; done
elif [ -d "$src/tests/fuzz/seeds-$target" ]; then cp "$src/tests/fuzz/seeds-$target"/* "$corpus"/
else "$build/bin/fuzz_seed" "$corpus" "$target"; fi
log="$out/$target.log"
if ! "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$findings/" "$corpus" >"$log" 2>&1; then
  tail -40 "$log"
  # libFuzzer names the input it saved: "Test unit written to PATH".
  found=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  echo "run_fuzzers: $target FOUND A CRASH: ${found:-no input saved} (log: $log; replay: $bin ${found:-INPUT})"
  exit 1
fi
runs=$(grep -E "^stat::number_of_executed_units" "$log" | awk '{print $2}')
echo "run_fuzzers: $target: $runs executions in ${seconds} s, no findings (corpus: $(ls "$corpus" | wc -l) inputs)"
