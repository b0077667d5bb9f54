#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address and undefined-behaviour sanitizers) and runs one for a bounded
# time, seeded with real chunks. Prints the executions run and any finding; exits non-zero on a finding.
#   tests/fuzz/run_fuzzers.sh TARGET SECONDS BUILD_DIR
set -euo pipefail
target=$1 seconds=${2:-20} build=${3:-build}
src=$(cd "$(dirname "$0")/../.." && pwd)
out="$build/fuzz"
mkdir -p "$out"
clangxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clangxx" ]; then echo "run_fuzzers: clang++ is missing (apt-get install clang libclang-rt-dev)" >&2; exit 1; fi
sources=(engine/core/check.cpp engine/core/intern.cpp profiler/transport/chunk.cpp profiler/transport/trace_file.cpp
         profiler/transport/protocol.cpp profiler/trace/trace_store.cpp profiler/record/recorder.cpp
         profiler/record/clock.cpp profiler/trace/run_info.cpp profiler/import/byte_source.cpp
         profiler/import/json_stream.cpp profiler/import/kineto_event.cpp profiler/import/kineto_names.cpp
         profiler/import/kineto_parse.cpp profiler/import/kineto_groups.cpp profiler/import/kineto_reader.cpp)
bin="$out/$target"
if [ ! -x "$bin" ] || [ -n "$(find "$src/profiler" "$src/engine/core" "$src/tests/fuzz" -newer "$bin" -name '*.[ch]*' | head -1)" ]; then
  "$clangxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src" "${sources[@]/#/$src/}" "$src/tests/fuzz/$target.cpp" -lfmt -lzstd -lz -lpthread -o "$bin"
fi
corpus="$out/corpus-$target"
mkdir -p "$corpus"
# Seeds: a small valid trace (and a live stream that starts with a hello) written by the test helper.
# (or, for targets with a folder of their own seeds, those: tests/fuzz/seeds-TARGET)
if [ -d "$src/tests/fuzz/seeds-$target" ]; then cp "$src/tests/fuzz/seeds-$target"/* "$corpus"/
else "$build/bin/fuzz_seed" "$corpus" "$target"; fi
log="$out/$target.log"
"$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$corpus" >"$log" 2>&1 || { tail -40 "$log"; echo "run_fuzzers: $target FOUND A CRASH (see $log)"; exit 1; }
runs=$(grep -E "^stat::number_of_executed_units" "$log" | awk '{print $2}')
echo "run_fuzzers: $target: $runs executions in ${seconds} s, no findings"
