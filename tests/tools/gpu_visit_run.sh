#!/usr/bin/env bash
# One visit to a lent GPU machine (docs/gpu.md, "Visiting a GPU"), run there from the repository's root with
# .gpuvisit/visit.tar.xz made here by gpu_visit_pack.sh. It builds nothing: it unpacks the binaries and the
# libraries (never over a file the machine has), then runs the checks in order of importance, each under its own
# time limit, and leaves logs, traces and screenshots in $OUT (at most 8 files come back: the small ones travel in
# results.tar.gz).
#   bash tests/tools/gpu_visit_run.sh [STEPS...]   steps: tests cudnn i57 hang bench bench16 traces nccl gui ncu cpu
# (default: all); GUI_VIEWS picks the screenshots' views (default: memory timeline ops), NCU_KERNELS the kernels
# Nsight Compute profiles (NAME:LAUNCHES_TO_SKIP ...)
set -u
repo=$PWD
OUT=${OUT:-/tmp/visit-out}
mkdir -p "$OUT/r"
steps=${*:-tests cudnn i57 hang bench bench16 traces nccl gui ncu cpu}
t0=$(date +%s)
log() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$OUT/r/visit.log"; }
want() { [[ " $steps " == *" $1 "* ]]; }
# the small results travel as one archive, remade after every step: a visit cut short still brings back the rest
pack() {
  find "$OUT" -maxdepth 1 -type f ! -name '*.png' ! -name '*.ustrace' ! -name 'results.tar.gz' -exec mv {} "$OUT/r/" \;
  tar -C "$OUT" -czf "$OUT/results.tar.gz.tmp" r && mv "$OUT/results.tar.gz.tmp" "$OUT/results.tar.gz"
}

# ---- unpack: binaries into build-gpu/bin (the tests find their data through the source path baked in at build
# time, which the pack recorded: linked to this copy), libraries into / without overwriting
python3 -c "import tarfile; tarfile.open('.gpuvisit/visit.tar.xz').extractall('/tmp')" || { log "unpack failed"; exit 1; }
# a baseline build (ULTRASCOPE_ASSETS tells it where this copy's presets are)
mkdir -p build-gpu/bin build-base/bin
mv /tmp/visit/bin/ultrascope-train-baseline build-base/bin/ultrascope-train 2>/dev/null
cp /tmp/visit/bin/* build-gpu/bin/
tar -C / --skip-old-files -xf /tmp/visit/runtime.tar
ldconfig
baked=$(cat /tmp/visit/source_dir 2>/dev/null)
[ -n "$baked" ] && [ ! -e "$baked" ] && { mkdir -p "$(dirname "$baked")" && ln -s "$repo" "$baked"; }
# CUDA libraries the image keeps outside the linker's paths (a Python venv's nvidia packages, CUPTI's folder)
extra=/usr/lib/x86_64-linux-gnu/openblas-openmp
# (cuDNN's runtime-compiled engines also want NVRTC)
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13 libnccl.so.2 libcudnn.so.9 libnvrtc.so.13; do
  ldconfig -p | grep -q "$lib" && continue
  f=$(find /usr/local /opt -name "$lib" 2>/dev/null | head -1)
  [ -n "$f" ] && extra="$extra:$(dirname "$f")"
done
driver=$(dirname "$(find /usr/local/nvidia /usr/lib/x86_64-linux-gnu -name 'libEGL_nvidia.so.0' 2>/dev/null | head -1)")
[ -n "$driver" ] && [ "$driver" != . ] && extra="$extra:$driver"
export LD_LIBRARY_PATH=$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
vendor=$(find /usr/local/nvidia /usr/share/glvnd -name '*nvidia*.json' -path '*egl_vendor*' 2>/dev/null | head -1)
[ -n "$vendor" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export PATH=$repo/build-gpu/bin:$PATH
B=$repo/build-gpu/bin
{
  nvidia-smi
  nproc
  grep -m1 'model name' /proc/cpuinfo
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "EGL vendor: ${__EGL_VENDOR_LIBRARY_FILENAMES:-none}"
  for b in ultrascope ultrascope-train ultrascope-tests train_gpt2cu; do echo "$b:"; ldd "$B/$b" | grep -E "not found|nccl|cudnn|cupti"; done
  mpirun --version
} > "$OUT/r/machine.txt" 2>&1
log "unpacked; $(grep -c 'not found' "$OUT/r/machine.txt") libraries not found"

if want tests; then
  log "[cuda] tests"
  timeout 300 "$B/ultrascope-tests" "[cuda]" --durations yes > "$OUT/r/cuda-tests.log" 2>&1
  log "[cuda] tests: exit $? ($(tail -2 "$OUT/r/cuda-tests.log" | tr '\n' ' '))"
fi
pack

if want cudnn; then
  # --attention cudnn (docs/gpu.md, "cuDNN's fused attention"): its tests (skipped = not run: the log says why),
  # then gpt2-124m bf16 20 steps with flash and with cudnn (speed, losses within 1e-2), bf16 against fp32 (the
  # losses within 2e-2: issue 57), a traced cudnn run's kernels, and llm.c beside it when its binary came along.
  log "cudnn: tests"
  timeout 240 "$B/ultrascope-tests" "[cudnn],cuda: cuDNN*,cuda: five training steps with --attention cudnn*" \
    --durations yes > "$OUT/r/cudnn-tests.log" 2>&1
  log "cudnn tests: exit $? ($(grep -c US_TEST_SKIPPED "$OUT/r/cudnn-tests.log") skipped; $(tail -2 "$OUT/r/cudnn-tests.log" | tr '\n' ' '))"
  g2=(--device cuda --preset gpt2-124m --steps 20)
  for run in "flash --precision bf16 --attention flash" "cudnn --precision bf16 --attention cudnn" \
    "fp32 --precision fp32 --attention naive"; do
    set -- $run
    name=$1
    shift
    timeout 150 "$B/ultrascope-train" "${g2[@]}" "$@" --metrics-out "$OUT/r/cudnn-$name.jsonl" > "$OUT/r/cudnn-$name.log" 2>&1
    log "cudnn: gpt2-124m $name: exit $?"
  done
  python3 tests/bench/compare_metrics.py "$OUT/r/cudnn-flash.jsonl" "$OUT/r/cudnn-cudnn.jsonl" --names flash,cudnn \
    --tolerance 1e-2 > "$OUT/r/cudnn-vs-flash.txt" 2>&1
  log "cudnn vs flash: $(tail -1 "$OUT/r/cudnn-vs-flash.txt")"
  python3 tests/bench/compare_metrics.py "$OUT/r/cudnn-fp32.jsonl" "$OUT/r/cudnn-cudnn.jsonl" --names fp32,bf16-cudnn \
    --tolerance 2e-2 > "$OUT/r/cudnn-bf16-vs-fp32.txt" 2>&1
  python3 tests/bench/compare_metrics.py "$OUT/r/cudnn-fp32.jsonl" "$OUT/r/cudnn-flash.jsonl" --names fp32,bf16-flash \
    --tolerance 2e-2 >> "$OUT/r/cudnn-bf16-vs-fp32.txt" 2>&1
  log "bf16 vs fp32: $(grep -h 'speed' "$OUT/r/cudnn-bf16-vs-fp32.txt" | tr '\n' ' ')"
  timeout 120 "$B/ultrascope-train" --device cuda --preset gpt2-124m --precision bf16 --attention cudnn --steps 8 \
    --trace "$OUT/t-cudnn.ustrace" --quiet > "$OUT/r/trace-cudnn.log" 2>&1
  timeout 120 "$B/ultrascope" report "$OUT/t-cudnn.ustrace" --json > "$OUT/r/report-cudnn.json" 2> "$OUT/r/report-cudnn.err"
  rm -f "$OUT/t-cudnn.ustrace"  # its figures are in the report
  if [ -x "$B/train_gpt2cu" ]; then
    timeout 200 python3 tests/bench/bench_vs_llmc.py --llmc "$B/train_gpt2cu" --build "$repo/build-gpu" --steps 30 \
      --models d12,d24 --attention cudnn > "$OUT/r/bench-llmc-cudnn.txt" 2>&1
    log "bench_vs_llmc --attention cudnn: exit $?"
  fi
fi
pack

if want i57; then
  dev=${VISIT_DEVICE:-cuda}  # VISIT_DEVICE=cpu: a dry run of the step on a machine without a GPU
  # Issue 57, item 1: NCCL carries every collective between two ranks on the one GPU (--nccl-shared-gpu: each rank
  # its NCCL_HOSTID, loopback sockets), each run against one rank of the same global batch, fp32 and bf16.
  one() {  # name, flags: one rank
    local name=$1; shift
    timeout 120 "$B/ultrascope-train" --device "$dev" --steps 10 --quiet --metrics-out "$OUT/r/$name.jsonl" "$@" \
      > "$OUT/r/$name.log" 2>&1
    log "$name: exit $?"
  }
  two() {  # name, flags: two ranks on the GPU through NCCL
    local name=$1; shift
    timeout 150 mpirun -n 2 --oversubscribe -x NCCL_DEBUG=WARN "$B/ultrascope-train" --device "$dev" --steps 10 \
      --quiet --nccl-shared-gpu --metrics-out "$OUT/r/$name.jsonl" "$@" > "$OUT/r/$name.log" 2>&1
    log "$name: exit $?"
  }
  for p in fp32 bf16; do
    one ref-b16-$p --preset small --batch 16 --precision $p
    two dp2-$p --preset small --batch 8 --dp 2 --zero 1 --precision $p --trace "$OUT/dp2-$p.ustrace"
    one ref-b8-$p --preset small --batch 8 --precision $p
    two tp2-$p --preset small --batch 8 --tp 2 --precision $p --trace "$OUT/tp2-$p.ustrace"
    one ref-ga4-$p --preset small --batch 8 --grad-accum 4 --precision $p
    two pp2-$p --preset small --batch 8 --grad-accum 4 --pp 2 --pp-schedule 1f1b --precision $p \
      --trace "$OUT/pp2-$p.ustrace"  # over the pipeline's NCCL channels (engine/comm/nccl_pipe_comm.h)
  done
  # each against one rank: fp32 to the CPU's 1e-5, bf16 to 2e-2 (its rounding)
  for p in fp32 bf16; do
    tol=1e-5; [ $p = bf16 ] && tol=2e-2
    for pair in dp2:ref-b16 tp2:ref-b8 pp2:ref-ga4; do
      python3 tests/bench/compare_metrics.py "$OUT/r/${pair#*:}-$p.jsonl" "$OUT/r/${pair%%:*}-$p.jsonl" \
        --tolerance $tol --names "1 rank,${pair%%:*} $p" 2>&1 | tail -1
    done
  done > "$OUT/r/i57-losses.txt"
  log "losses: $(tr '\n' ';' < "$OUT/r/i57-losses.txt")"
  for t in dp2-fp32 dp2-bf16 tp2-fp32 pp2-fp32; do
    timeout 60 "$B/ultrascope" report "$OUT/$t.ustrace" > "$OUT/r/report-$t.txt" 2>&1
    timeout 60 "$B/ultrascope" report "$OUT/$t.ustrace" --json > "$OUT/r/report-$t.json" 2>&1
  done
  # --slow-rank 1 named by blame from CUPTI's kernels
  two slow --preset small --batch 8 --dp 2 --steps 12 --slow-rank 1 --slow-factor 3 --trace "$OUT/slow.ustrace"
  timeout 60 "$B/ultrascope" report "$OUT/slow.ustrace" > "$OUT/r/report-slow.txt" 2>&1
  log "slow-rank blame: $(grep -m2 -i -E 'holds the run back|stands out' "$OUT/r/report-slow.txt" | tr '\n' ' ')"
  log "comm paths: $(grep -h -m1 -o '"comm_backend": *"[^"]*"' "$OUT"/r/report-pp2-fp32.json "$OUT"/r/report-dp2-fp32.json 2>/dev/null | tr '\n' ' ')"
  rm -f "$OUT"/dp2-bf16.ustrace "$OUT"/tp2-*.ustrace "$OUT"/pp2-*.ustrace "$OUT"/slow.ustrace  # their figures are in the reports
  # item 4: the live GUI of a dp 2 NCCL run, drawn on the node without an X server
  for view in memory timeline overlap; do
    env -u DISPLAY timeout 150 "$B/ultrascope" -n 2 --device "$dev" --preset small --dp 2 --nccl-shared-gpu \
      --steps 30 --exit-when-done --view $view --fit-step 20 --screenshot "$OUT/gui-dp2-$view.png" \
      > "$OUT/r/gui-dp2-$view.log" 2>&1
    log "gui dp2 $view: exit $?"
  done
fi
pack

if want hang; then
  dev=${VISIT_DEVICE:-cuda}
  # Issue 57, item 2: a hang on NCCL. Rank 1 stops calling collectives at step 3 of a dp 2 run whose all-reduces
  # cross NCCL on the one GPU: rank 0's all-reduce never completes (its flight recorder entry stays started, seen
  # through the op's CUDA event), the run stops on the step watchdog, both ranks dump, and the report names rank 1.
  timeout 150 "$B/ultrascope" run -n 2 --device "$dev" --nccl-shared-gpu --dp 2 --preset tiny --steps 1000 \
    --hang-rank 1 --hang-at-step 3 --hang-kind skip --hang-timeout 10 --trace "$OUT/hang.ustrace" \
    > "$OUT/r/hang-run.log" 2>&1
  log "hang run: exit $? (non-zero expected); $(grep -m1 -E 'stopped making progress' "$OUT/r/hang-run.log")"
  timeout 60 "$B/ultrascope" report "$OUT/hang.ustrace" > "$OUT/r/report-hang.txt" 2>&1
  timeout 60 "$B/ultrascope" report "$OUT/hang.ustrace" --json > "$OUT/r/report-hang.json" 2>&1
  log "hang verdict: $(python3 -c 'import json,sys; h=json.load(open(sys.argv[1]))["hang"]; print(h["kind"], "culprits", h["culprit_ranks"], "-", h["verdict"][:160])' "$OUT/r/report-hang.json" 2>&1 | tail -1)"
  log "hang leftovers: $(ps -eo stat,comm | awk '$2 ~ /^ultrascope-tra/ && $1 !~ /^Z/' | wc -l) live ultrascope-train processes (killed ones wait a moment as zombies for mpirun's daemon to reap them)"
  rm -f "$OUT/hang.ustrace"
fi
pack

if want bench; then
  log "bench_vs_llmc (d12, d24; baseline build beside)"
  timeout 300 python3 tests/bench/bench_vs_llmc.py --llmc "$B/train_gpt2cu" --build "$repo/build-gpu" \
    --baseline-build "$repo/build-base" --steps 30 --models d12,d24 > "$OUT/r/bench-llmc.txt" 2>&1
  log "bench: exit $?"
fi
pack

if want bench16; then
  timeout 120 python3 tests/bench/bench_vs_llmc.py --llmc "$B/train_gpt2cu" --build "$repo/build-gpu" \
    --baseline-build "$repo/build-base" --steps 20 --models d12 --batch 16 --llmc-args "-r 0" > "$OUT/r/bench-llmc-b16.txt" 2>&1
  log "bench 16x1024: exit $?"
fi
pack

if want traces; then
  for side in new base; do
    bin=$B/ultrascope-train
    [ $side = base ] && bin=$repo/build-base/bin/ultrascope-train
    log "trace ($side)"
    ULTRASCOPE_ASSETS=$repo/assets timeout 120 "$bin" --device cuda --preset gpt2-124m --precision bf16 --attention flash --steps 8 \
      --trace "$OUT/t-$side.ustrace" --quiet > "$OUT/r/trace-$side.log" 2>&1
    timeout 120 "$B/ultrascope" report "$OUT/t-$side.ustrace" --json > "$OUT/r/report-$side.json" 2> "$OUT/r/report-$side.err"
    timeout 120 "$B/ultrascope" report "$OUT/t-$side.ustrace" > "$OUT/r/report-$side.txt" 2>&1
  done
  rm -f "$OUT/t-base.ustrace"  # its figures are in the report
fi
pack

if want nccl; then
  # NCCL between two ranks on one GPU: distinct NCCL_HOSTIDs make them two hosts to NCCL, which then uses its
  # socket transport over loopback; the same runs without them take MPI with host staging (the reference).
  run2() {  # name, extra env for each rank, flags
    local name=$1 hostid=$2
    shift 2
    timeout 150 mpirun -n 2 --oversubscribe -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1 -x NCCL_DEBUG=WARN \
      bash -c "[ -n '$hostid' ] && export NCCL_HOSTID=$hostid-\$OMPI_COMM_WORLD_RANK; exec $B/ultrascope-train --device cuda --steps 10 --quiet --metrics-out $OUT/r/$name.jsonl $*" \
      > "$OUT/r/$name.log" 2>&1
    log "$name: exit $?"
  }
  log "nccl"
  run2 nccl-dp2 host --preset small --dp 2 --zero 1 --trace "$OUT/nccl-dp2.ustrace"
  run2 staged-dp2 "" --preset small --dp 2 --zero 1
  run2 nccl-dp2-ep2 host --preset small-moe --dp 2 --ep 2
  run2 staged-dp2-ep2 "" --preset small-moe --dp 2 --ep 2
  # the product's option for the same (each rank its NCCL_HOSTID, loopback)
  run2 option-dp2 "" --preset small --dp 2 --zero 1 --nccl-shared-gpu
  run2 option-dp2-ep2 "" --preset small-moe --dp 2 --ep 2 --nccl-shared-gpu
  timeout 60 "$B/ultrascope" report "$OUT/nccl-dp2.ustrace" > "$OUT/r/report-nccl-dp2.txt" 2>&1
  timeout 60 "$B/ultrascope" report "$OUT/nccl-dp2.ustrace" --json > "$OUT/r/report-nccl-dp2.json" 2>&1
fi
pack

if want gui; then
  # the live GUI on the GPU node, no X server: the screenshot mode draws offscreen through EGL
  for view in ${GUI_VIEWS:-memory timeline ops}; do
    log "gui $view"
    env -u DISPLAY timeout 150 "$B/ultrascope" -n 1 --device cuda --preset gpt2-124m --precision bf16 \
      --attention flash --steps 30 --exit-when-done --view $view --fit-step 20 --screenshot "$OUT/gui-$view.png" \
      > "$OUT/r/gui-$view.log" 2>&1
    log "gui $view: exit $?"
  done
fi
pack

if want ncu; then
  # Nsight Compute on the kernels that the product's trace ranks first: one launch of each in the second step
  ncu=$(command -v ncu || find /usr/local /opt -name ncu -type f 2>/dev/null | head -1)
  log "ncu: ${ncu:-not found}"
  for ks in ${NCU_KERNELS:-dkv_kernel:13 dq_kernel:13 forward_kernel:13 fused_kernel:1 segment_add_kernel:1}; do
    [ -n "$ncu" ] || break
    k=${ks%:*}
    timeout 60 "$ncu" --kernel-name "$k" --launch-skip "${ks#*:}" --launch-count 1 --section SpeedOfLight \
      --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis "$B/ultrascope-train" --device cuda --preset gpt2-124m --precision bf16 \
      --attention flash --steps 3 --quiet > "$OUT/r/ncu-$k.txt" 2>&1
    log "ncu $k: exit $?"
  done
fi
pack

if want cpu; then
  log "cpu"
  for t in 1 8 16; do timeout 60 "$B/bench_sgemm_peak" $t; done > "$OUT/r/cpu-sgemm-peak.txt" 2>&1
  for p in fp32 bf16; do
    for t in 1 8 16; do
      timeout 90 "$B/ultrascope-train" --device cpu --threads $t --precision $p --hidden 256 --layers 4 --heads 4 \
        --seq 256 --batch 8 --steps 12 --metrics-out "$OUT/r/cpu-$p-$t.jsonl" --quiet > "$OUT/r/cpu-$p-$t.log" 2>&1
    done
  done
  log "cpu done"
fi
pack

log "done"
pack
ls -la "$OUT"
