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
sources=(common/core/check.cpp common/core/intern.cpp common/core/kernel_names.cpp common/core/kernel_kind.cpp
         profiler/transport/chunk.cpp profiler/transport/trace_file.cpp
         profiler/transport/protocol.cpp profiler/transport/rank_metadata.cpp profiler/trace/trace_store.cpp profiler/record/recorder.cpp
         profiler/record/clock.cpp profiler/trace/run_info.cpp profiler/import/byte_source.cpp
         profiler/import/json_stream.cpp profiler/import/kineto_event.cpp profiler/import/kineto_names.cpp
         profiler/import/kineto_parse.cpp profiler/import/kineto_collector.cpp profiler/import/kineto_document.cpp profiler/import/kineto_keys.cpp
         profiler/import/kineto_groups.cpp profiler/import/kineto_reader.cpp)
# The memory snapshot reader (tests/fuzz/fuzz_pickle_reader.cpp) adds its own sources and is seeded with the
# synthetic snapshots and the hostile set of tests/data/snapshot.
if [ "$target" = fuzz_pickle_reader ]; then
  sources+=(common/core/format.cpp profiler/snapshot/plain_data.cpp profiler/snapshot/pickle_reader.cpp
            profiler/snapshot/plain_json_reader.cpp profiler/snapshot/memory_snapshot.cpp
            profiler/snapshot/frame_rules.cpp profiler/snapshot/snapshot_analysis.cpp profiler/snapshot/snapshot_series.cpp)
fi
# The memory timeline reader and the [memory] events' categories (tests/fuzz/fuzz_memory_timeline.cpp).
if [ "$target" = fuzz_memory_timeline ]; then
  sources+=(profiler/import/memory_timeline.cpp profiler/import/kineto_memory_ops.cpp
            profiler/import/memory_category_agreement.cpp)
fi
bin="$out/$target"
if [ ! -x "$bin" ] || [ -n "$(find "$src/profiler" "$src/common" "$src/tests/fuzz" -newer "$bin" -name '*.[ch]*' | head -1)" ]; then
  "$clangxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src" "${sources[@]/#/$src/}" "$src/tests/fuzz/$target.cpp" -lfmt -lzstd -lz -lsimdjson -ldeflate -lpthread -o "$bin"
fi
corpus="$out/corpus-$target"
mkdir -p "$corpus"
# Seeds: a small valid trace (and a live stream that starts with a hello) written by the test helper.
# (the snapshot reader's seeds are the synthetic snapshots and the hostile set of tests/data/snapshot; targets
# with a folder of their own seeds take those: tests/fuzz/seeds-TARGET)
if [ "$target" = fuzz_pickle_reader ]; then cp "$src"/tests/data/snapshot/*.pickle "$src"/tests/data/snapshot/*.json \
  "$src"/tests/data/snapshot/hostile/* "$corpus"/
elif [ -d "$src/tests/fuzz/seeds-$target" ]; then cp "$src/tests/fuzz/seeds-$target"/* "$corpus"/
else "$build/bin/fuzz_seed" "$corpus" "$target"; fi
log="$out/$target.log"
"$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$corpus" >"$log" 2>&1 || { tail -40 "$log"; echo "run_fuzzers: $target FOUND A CRASH (see $log)"; exit 1; }
runs=$(grep -E "^stat::number_of_executed_units" "$log" | awk '{print $2}')
echo "run_fuzzers: $target: $runs executions in ${seconds} s, no findings"
