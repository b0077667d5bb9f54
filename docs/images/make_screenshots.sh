#!/usr/bin/env bash
# Regenerates the README's screenshots with the product's own screenshot mode, under Xvfb.
#   docs/images/make_screenshots.sh [build]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shot() { xvfb-run -a -s "-screen 0 1280x800x24" "$build/bin/ultrascope" "$@"; }
# The whole window on the default live run: dp 2 x pp 2 (1F1B, 4 micro-batches) on the small preset.
shot --exit-when-done --steps 8 --screenshot "$here/ultrascope-live-dp2-pp2.png"
# One view at a time, from traces of ZeRO-3 and of a zero-bubble pipeline.
"$build/bin/ultrascope" run --dp 2 --zero 3 --bucket-mb 2 --preset small --steps 8 --trace "$work/zero3.ustrace" >/dev/null
shot "$work/zero3.ustrace" --view memory --screenshot "$here/memory-zero3.png"
shot "$work/zero3.ustrace" --view timeline --screenshot "$here/timeline-zero3.png"
"$build/bin/ultrascope" run --pp 2 --pp-schedule zb1 --grad-accum 4 --preset small --steps 5 --trace "$work/zb1.ustrace" >/dev/null
shot "$work/zb1.ustrace" --view timeline --screenshot "$here/timeline-pp2-zb1.png"
shot "$work/zb1.ustrace" --view overlap --screenshot "$here/overlap-pp2-zb1.png"
# Tensor + sequence parallelism: tp collectives on the critical path, communication by group.
"$build/bin/ultrascope" run --tp 2 --sp --preset small --steps 5 --trace "$work/tp2sp.ustrace" >/dev/null
shot "$work/tp2sp.ustrace" --view timeline --fit-step 4 --screenshot "$here/timeline-tp2-sp.png"
shot "$work/tp2sp.ustrace" --view overlap --screenshot "$here/overlap-tp2-sp.png"
rm -f "$here"/*.png.json
# Mixture of experts over ep 2: the router's load per layer and step, each rank's expert time and all-to-all waits.
"$build/bin/ultrascope" run --dp 2 --ep 2 --preset small-moe --steps 30 --trace "$work/moe-ep2.ustrace" >/dev/null
shot "$work/moe-ep2.ustrace" --view experts --screenshot "$here/experts-ep2.png"
shot "$work/moe-ep2.ustrace" --view timeline --fit-step 20 --screenshot "$here/timeline-moe-ep2.png"
rm -f "$here"/*.png.json
# A GPU run, from the trace an H100 wrote (docs/gpu.md, "Verified on an H100"): no GPU needed to redraw it.
gpu="$here/gpt2-124m-bf16-h100.ustrace"
shot "$gpu" --view memory --fit-step 10 --screenshot "$here/gpu-memory-gpt2-124m-h100.png"
shot "$gpu" --view timeline --fit-step 10 --screenshot "$here/gpu-timeline-gpt2-124m-h100.png"
# Where the compute goes, op by op: the PyTorch comparison's model on this CPU's 2 threads, and the H100's kernels.
"$build/bin/ultrascope" run -n 1 --hidden 256 --layers 4 --heads 4 --seq 256 --batch 8 --threads 2 --steps 8 \
    --trace "$work/cpu-ops.ustrace" >/dev/null
shot "$work/cpu-ops.ustrace" --view ops --screenshot "$here/ops-cpu-h256.png"
shot "$gpu" --view ops --screenshot "$here/ops-gpt2-124m-h100.png"
rm -f "$here"/*.png.json
# Workshop lessons (docs/lessons.md): each lesson's runs launched in turn, its views outlined, its claims checked.
# The data-parallel lesson's two runs in the Compare tab: the table, then their diff as a waterfall (docs/diff.md).
shot --lesson data-parallel --lesson-runs all --view compare --screenshot "$here/compare-diff-data-parallel.png"
for lesson in mixed-precision zero pipeline flash-attention; do
  shot --lesson "$lesson" --lesson-runs all --screenshot "$here/lesson-$lesson.png"
done
# The planner (docs/planner.md): Llama 3 70B on 1,024 H100s, every layout ranked, the best one's memory and time.
shot --no-launch --plan llama3-70b --plan-gpus 1024 --view planner --screenshot "$here/planner-llama3-70b-h100x1024.png"
# The best layout of Llama 3 405B on 8,192 H100s, its step as the planner predicts it, in the timeline view: one rank
# per pipeline stage, the textbook's schedule above the planner's model of it.
shot --no-launch --plan llama3-405b --plan-gpus 8192 --plan-show --view timeline \
     --screenshot "$here/planner-predicted-llama3-405b-h100x8192.png"
rm -f "$here"/*.png.json
# Who holds the run back (docs/blame.md): the Ranks view on dp 4 with rank 2 slowed 3x, and on 1,024 synthetic rank
# files (bench_blame: 10 MB of JSON each, rank 341 computing 1.05x; read from their digests).
"$build/bin/ultrascope" run --preset tiny --hidden 128 --seq 128 --batch 8 --steps 6 --dp 4 --slow-rank 2 \
  --slow-factor 3 --trace "$work/slowrank.ustrace" >/dev/null
shot "$work/slowrank.ustrace" --view ranks --screenshot "$here/ranks-dp4-slow-rank.png"
shot "$work/slowrank.ustrace" --view timeline --fit-step 4 --screenshot "$here/timeline-waits-dp4-slow-rank.png"
"$build/bin/bench_blame" 1024 10 "$work/ranks1024" >/dev/null
shot "$work/ranks1024" --view ranks --screenshot "$here/ranks-1024-synthetic.png"
rm -f "$here"/*.png.json
# A hung job (docs/gui.md, the Hang view): 64 ranks' Flight Recorder dumps (dp 8 x tp 8), rank 37 stopped before its
# tp group's all-reduce, rank 50 left no dump.
"$build/bin/make_hang_dumps" "$work/hang64" --ranks 64 --tp 8 --stop-rank 37 --no-dump 50 >/dev/null
shot "$work/hang64" --view hang --screenshot "$here/hang-view.png"
rm -f "$here"/*.png.json
# Runs of other frameworks: a real 4-rank PyTorch trace (FSDP2 x tensor parallelism on gloo) and a memory snapshot.
data="$(cd "$here/../.." && pwd)/tests/data"
shot "$data/kineto/dp2_tp2/iteration_4" --view timeline --screenshot "$here/pytorch-dp2-tp2-timeline.png"
shot "$data/kineto/hta/trace_filter_sampled" --view timeline --screenshot "$here/pytorch-trace-hta-timeline.png"
shot "$data/snapshot/rank0_memory_snapshot.pickle" --view snapshot --screenshot "$here/pytorch-memory-snapshot.png"
# The real DDP run's memory by category: measured by PyTorch's memory profiler (its timeline export in the folder).
shot "$data/kineto/ddp" --view memory --screenshot "$here/pytorch-ddp-memory-categories.png"
rm -f "$here"/*.png.json
# Two emulated nodes joined by a 1 Gbit/s link (docs/nodes.md; root only): tp 2 x dp 2 with tp inside a node (block)
# and tp across the link (cyclic); the overlap view marks the groups that crossed it.
if [ "$(id -u)" = 0 ]; then
  for placement in block cyclic; do
    "$build/bin/ultrascope" run --nodes 2 --inter-node-gbps 1 --node-placement "$placement" -n 4 --tp 2 --dp 2 \
        --preset small --steps 5 --trace "$work/nodes-$placement.ustrace" >/dev/null
    shot "$work/nodes-$placement.ustrace" --view timeline --fit-step 4 \
        --screenshot "$here/timeline-nodes-tp2-dp2-$placement.png"
  done
  shot "$work/nodes-block.ustrace" --view overlap --screenshot "$here/overlap-nodes-tp2-dp2-block.png"
  rm -f "$here"/*.png.json
fi
