#!/usr/bin/env python3
"""Data parallelism on 2 ranks, small preset, each rank on one core: how much of the gradient communication hides
behind backward with bucketed overlap against --no-overlap (and with the poll progress mode), with the step time of
each; then ZeRO-0..3 peak memory per rank per category against the prediction. Every run goes through
`ultrascope run` and is measured by `ultrascope report --json` on its trace.

    python3 tests/bench/bench_dp.py [--build build] [--steps 20]
"""
import argparse
import json
import os
import subprocess
import tempfile

CATS = ["params", "grads", "master_params", "optimizer_state", "activations", "temporaries", "comm_buffers"]


def run(build, args, steps):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.ustrace")
        subprocess.run([os.path.join(build, "bin", "ultrascope"), "run", "-n", "2", "--trace", trace, "--dp", "2",
                        "--preset", "small", "--steps", str(steps)] + args, check=True, capture_output=True)
        out = subprocess.run([os.path.join(build, "bin", "ultrascope"), "report", trace, "--json"], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)


def mib(b):
    return "-" if b is None else f"{b / 2**20:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    print("2 ranks x 1 thread, small preset (h 256, L 4, seq 128, micro-batch 8), fp32; figures measured from the "
          "trace over the steady steps unless marked predicted")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"\n{'mode':<34} {'step ms':>8} {'comm ms/step':>12} {'overlapped':>10} {'exposed ms/step':>15}")
    for label, args in [("bucketed overlap (1 MiB buckets)", []), ("bucketed overlap (4 MiB buckets)", ["--bucket-mb", "4"]),
                        ("--no-overlap", ["--no-overlap"]), ("overlap, --comm-progress poll", ["--comm-progress", "poll"])]:
        rep = run(a.build, args, a.steps)
        r0 = rep["ranks"][0]
        steps = max(1, len(r0["steps"]) - 1)
        print(f"{label:<34} {rep['throughput']['step_s'] * 1e3:>8.1f} {r0['comm_s'] * 1e3 / steps:>12.1f} "
              f"{r0['overlap_pct']:>9.1f}% {r0['comm_exposed_s'] * 1e3 / steps:>15.1f}")
    print(f"\nPeak memory per rank (MiB), measured / predicted:")
    print(f"{'ZeRO':<5} " + " ".join(f"{c:>21}" for c in CATS))
    for zero in range(4):
        rep = run(a.build, ["--zero", str(zero), "--steps", "3"], 3)
        r0 = rep["ranks"][0]
        cells = [f"{mib(r0['memory_peak_bytes'][c])} / {mib(r0['memory_predicted_bytes'][c])}" for c in CATS]
        print(f"{zero:<5} " + " ".join(f"{c:>21}" for c in cells))


if __name__ == "__main__":
    main()
