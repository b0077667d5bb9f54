#!/usr/bin/env python3
"""Tensor parallelism on the small preset, one core per rank: tp 1 (one rank, one thread; and two threads, the same
cores as tp 2) against tp 2 without and with sequence parallelism. Per run: step time and tokens/s; tensor-parallel
bytes sent per step, measured from the collectives in the trace against the engine's predicted walk and the
textbook; the exposed tensor-parallel time per step, measured against a prediction from the collectives the engine
issues and this machine's measured cost of each (alpha + beta * bytes, fitted to bench_collectives under mpirun);
and the activation peak per rank, measured against the predicted walk and the textbook's per-layer formula. The
measured exposed time includes waiting for the other rank to reach the collective (shown apart, measured by matching
each collective across the group: the shortest of its durations is the transfer); the prediction is transfers only.

    python3 tests/bench/bench_tp.py [--build build] [--steps 12]
"""
import argparse
import json
import os
import subprocess
import tempfile

from bench_common import MPI_ENV, cpu_features


def calibrate(build, ranks=2):
    """Least-squares alpha + beta * sent for each collective, from the median times of bench_collectives."""
    out = subprocess.run(["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", "none",
                          os.path.join(build, "bin", "bench_collectives"), "20"],
                         check=True, capture_output=True, text=True, env=dict(MPI_ENV, OMP_NUM_THREADS="1")).stdout
    points = {}
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            points.setdefault(j["op"], []).append((sent(j["op"], j["bytes"], ranks), j["median_s"]))
    fit = {}
    for op, pts in points.items():
        n = len(pts)
        mx = sum(x for x, _ in pts) / n
        my = sum(y for _, y in pts) / n
        beta = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
        fit[op] = (max(0.0, my - beta * mx), beta)
    return fit


def sent(op, whole_bytes, n):
    ring = (n - 1) / n
    return 2 * whole_bytes * ring if op == "all_reduce" else whole_bytes * ring


def run(build, ranks, args, steps, threads):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.ustrace")
        subprocess.run([os.path.join(build, "bin", "ultrascope"), "run", "-n", str(ranks), "--trace", trace,
                        "--preset", "small", "--steps", str(steps), "--threads", str(threads)] + args,
                       check=True, capture_output=True, env=MPI_ENV)
        out = subprocess.run([os.path.join(build, "bin", "ultrascope"), "report", trace, "--json"], check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out)


def mib(b):
    return f"{b / 2**20:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    print(f"CPU: {cpu_features()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; "
          f"small preset (h 256, L 4, 4 heads, seq 128, micro-batch 8), fp32, {a.steps} steps, steady steps only")
    fit = calibrate(a.build)
    print("\nCollective cost on this machine (2 ranks, MPI shared memory, fitted to bench_collectives medians):")
    for op, (alpha, beta) in sorted(fit.items()):
        print(f"  {op:<15} alpha {alpha * 1e6:7.1f} us   beta {beta * 1e9:6.3f} ns/byte sent "
              f"({1 / beta / 1e9 if beta > 0 else float('inf'):.2f} GB/s)")

    rows = [("tp 1 (1 rank x 1 thread)", 1, [], 1), ("tp 1 (1 rank x 2 threads)", 1, [], 2),
            ("tp 2 (2 ranks x 1 thread)", 2, ["--tp", "2"], 1), ("tp 2 + sp (2 ranks x 1 thread)", 2, ["--tp", "2", "--sp"], 1)]
    print(f"\n{'run':<32} {'step ms':>8} {'tokens/s':>9} | {'tp sent MiB/step: measured':>26} {'predicted':>9} "
          f"{'textbook':>9} | {'tp exposed ms/step: measured (of it waiting for the peer)':>28} {'predicted':>9} | "
          f"{'activation peak MiB: measured':>29} {'predicted':>9} {'per layer':>9} {'textbook/layer':>14}")
    for label, ranks, args, threads in rows:
        rep = run(a.build, ranks, args, a.steps, threads)
        r0 = rep["ranks"][0]
        steps = max(1, len(r0["steps"]) - 1)
        pred = rep["predicted"]
        tp_measured = r0["comm_bytes"].get("tp", 0)
        tp_predicted = r0["comm_bytes_predicted"].get("tp", 0)
        exposed = r0["comm_exposed_by_group_s"].get("tp", 0) / steps
        waiting = r0["comm_wait_by_group_s"].get("tp", 0) / steps
        predicted_exposed = sum(c["count"] * (fit[c["op"]][0] + fit[c["op"]][1] * sent(c["op"], c["bytes"], ranks))
                                for c in pred.get("tp_collectives_per_step", []))
        print(f"{label:<32} {rep['throughput']['step_s'] * 1e3:>8.1f} {rep['throughput']['tokens_per_s']:>9.0f} | "
              f"{mib(tp_measured):>26} {mib(tp_predicted):>9} {mib(pred['tp_comm_bytes_per_step_formula']):>9} | "
              f"{exposed * 1e3:>13.1f} ({waiting * 1e3:4.1f} waiting) {predicted_exposed * 1e3:>9.1f} | "
              f"{mib(r0['activations_peak_bytes']):>29} {mib(r0['activations_predicted_bytes']):>9} "
              f"{mib(pred['activations_per_layer_bytes']):>9} {mib(pred['activations_per_layer_formula_bytes']):>14}")
    print("\nRead: tp 2 halves parameters, gradients, optimizer state and the attention/MLP activations per rank, and "
          "pays for it with collectives the compute thread waits for (all of their time is exposed); sequence "
          "parallelism divides the rest of the activations by tp too, for more (smaller) collectives. The textbook "
          "column counts 2-byte activations and 1-byte dropout masks (doubled for fp32); this engine keeps no masks.")


if __name__ == "__main__":
    main()
