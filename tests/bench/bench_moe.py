#!/usr/bin/env python3
"""Mixture of experts and expert parallelism on the small-moe preset (h 256, L 4, every block 4 experts, top-2,
seq 128, micro-batch 8, fp32). Two tables, one run per row, all figures from the run's own trace and report:

1. Layouts: the dense small model on dp 2 for reference; the MoE model on dp 2 (every rank all experts), dp 2 x
   ep 2, dp 4 x ep 2 and dp 4 x ep 4 (4 ranks on the machine's cores are oversubscribed when it has fewer: shapes,
   not speed). Per run: step time and tokens/s; parameter bytes per rank measured against predicted and the
   experts' share of them by the formula E/ep x L_moe x (8h^2 + 5h) x 4 B; expert parallelism's all-to-all bytes
   sent per step measured, predicted with uniform routing, and the textbook's 4 K b s h (ep-1)/ep per MoE block;
   the all-to-alls' time and the part spent waiting for the group's last rank; expert GEMM time slowest / fastest
   rank; the router's imbalance (most loaded expert over the mean) at the first steady step and the last.
2. Capacity on dp 2 x ep 2: factor 0 (dropless), 1, 1.25, 2: choices dropped, all-to-all bytes, step time, the
   all-to-alls' waiting and the router's imbalance (which counts the dropped choices too).

    python3 tests/bench/bench_moe.py [--build build] [--steps 6]
"""
import argparse
import json
import os
import subprocess
import tempfile

from bench_common import MPI_ENV, cpu_features


def run(build, preset, dp, ep, steps, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.ustrace")
        args = [os.path.join(build, "bin", "ultrascope"), "run", "-n", str(dp), "--trace", trace, "--preset", preset,
                "--dp", str(dp), "--steps", str(steps), *extra]
        if ep > 1:
            args += ["--ep", str(ep)]
        subprocess.run(args, check=True, capture_output=True, env=MPI_ENV)
        out = subprocess.run([os.path.join(build, "bin", "ultrascope"), "report", trace, "--json"], check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out)


def mib(b):
    return f"{b / 2**20:.2f}"


def per_step(rank, key, group):
    steps = max(1, len(rank["steps"]) - 1)
    return rank[key].get(group, 0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    cores = os.cpu_count()
    h, L, E, K, B, s = 256, 4, 4, 2, 8, 128
    print(f"CPU: {cpu_features()}, {cores} cores; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; small-moe preset (h {h}, L {L}, E {E}, top-{K}, seq {s}, "
          f"micro-batch {B}), fp32, {a.steps} steps (steady steps measured); threads per rank = cores / ranks")
    print(f"\n{'run':<40} {'step ms':>8} {'tok/s':>6} | {'params MiB/rank: measured':>25} {'predicted':>9} "
          f"{'experts (formula)':>17} | {'a2a MiB/step: measured':>22} {'uniform':>7} {'textbook':>8} | "
          f"{'a2a ms/step':>11} {'waiting':>7} | {'expert time max/min':>19} {'imbalance':>12}")
    for preset, dp, ep in [("small", 2, 1), ("small-moe", 2, 1), ("small-moe", 2, 2), ("small-moe", 4, 2),
                           ("small-moe", 4, 4)]:
        rep = run(a.build, preset, dp, ep, a.steps)
        ranks = rep["ranks"]
        params = max(r["memory_peak_bytes"]["params"] for r in ranks)
        params_pred = max(r["memory_predicted_bytes"]["params"] for r in ranks)
        experts = E // ep * L * (8 * h * h + 5 * h) * 4 if preset == "small-moe" else 0
        sent = max(r["comm_bytes"].get("ep", 0) for r in ranks)  # per step already
        uniform = max(r["comm_bytes_predicted"].get("ep", 0) for r in ranks)
        textbook = rep["predicted"].get("ep_comm_bytes_per_step_formula", 0)
        a2a = sum(per_step(r, "comm_by_group_s", "ep") for r in ranks) / len(ranks)
        wait = sum(per_step(r, "comm_wait_by_group_s", "ep") for r in ranks) / len(ranks)
        ex = rep.get("experts") or {}
        spread = ex.get("experts_max_over_min", 0) if ep > 1 else float("nan")
        layers = ex.get("layers", [])
        imbalance = "-"
        if layers:  # the most loaded expert over the mean, averaged over layers: first steady step -> last step
            def at(i):
                return sum(max(l["choices_per_expert"][i]) / (sum(l["choices_per_expert"][i]) / len(l["share"]))
                           for l in layers) / len(layers)
            imbalance = f"{at(1 if len(layers[0]['steps']) > 1 else 0):.2f} -> {at(-1):.2f}"
        label = f"{preset} dp {dp}" + (f" x ep {ep}" if ep > 1 else "") + (" (over-subscribed)" if dp > cores else "")
        print(f"{label:<40} {rep['throughput']['step_s'] * 1e3:>8.0f} {rep['throughput']['tokens_per_s']:>6.0f} | "
              f"{mib(params):>25} {mib(params_pred):>9} {mib(experts):>17} | {mib(sent):>22} {mib(uniform):>7} "
              f"{mib(textbook):>8} | {a2a * 1e3:>11.1f} {wait * 1e3:>7.1f} | {spread:>19.2f} {imbalance:>12}")

    print(f"\n{'capacity factor (dp 2 x ep 2)':<30} {'dropped':>8} {'a2a MiB/step':>12} {'step ms':>8} "
          f"{'waiting ms':>10} {'imbalance':>9}")
    for factor in [0, 1.0, 1.25, 2.0]:
        rep = run(a.build, "small-moe", 2, 2, a.steps, ["--moe-capacity-factor", str(factor)])
        layers = rep["experts"]["layers"]
        dropped = sum(l["dropped_fraction"] for l in layers) / len(layers)
        sent = max(r["comm_bytes"].get("ep", 0) for r in rep["ranks"])
        wait = sum(per_step(r, "comm_wait_by_group_s", "ep") for r in rep["ranks"]) / len(rep["ranks"])
        imbalance = sum(l["imbalance_mean"] for l in layers) / len(layers)
        label = "0 (dropless)" if factor == 0 else f"{factor:g}"
        print(f"{label:<30} {100 * dropped:>7.1f}% {mib(sent):>12} {rep['throughput']['step_s'] * 1e3:>8.0f} "
              f"{wait * 1e3:>10.1f} {imbalance:>9.2f}")
    print("\nRead: ep divides the experts' parameters and their optimizer state by ep; each MoE block then sends each "
          "token's K rows to the ranks of its experts and back, in forward and in backward. The router is never even: "
          "the all-to-all waits for the rank whose experts got the most rows, which is the idle time of expert "
          "parallelism. A capacity factor bounds that at the price of dropped choices.")


if __name__ == "__main__":
    main()
