#!/usr/bin/env python3
"""Two runs of ultrascope-train side by side from their --metrics-out files (one JSON object a step): the median
step time of each (steps 4 on when there are more than 6), B's speed over A's, and the worst relative difference of
their losses step by step. Exits 1 when the losses part by more than --tolerance, so a GPU visit's step can say
whether, e.g., --attention cudnn follows --attention flash, or bf16 follows fp32.

  python3 tests/bench/compare_metrics.py A.jsonl B.jsonl [--tolerance 0.01] [--names flash,cudnn]
"""
import argparse
import json
import statistics
import sys


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def median_step_ms(rows):
    times = [r["step_ms"] for r in rows]
    return statistics.median(times[3:] if len(times) > 6 else times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tolerance", type=float, default=1e-2, help="largest relative loss difference allowed")
    ap.add_argument("--names", default="A,B")
    args = ap.parse_args()
    name_a, name_b = args.names.split(",")
    a, b = read(args.a), read(args.b)
    if not a or not b:
        sys.exit(f"no steps in {args.a if not a else args.b}")
    steps = min(len(a), len(b))
    worst, at = 0.0, 0
    for i in range(steps):
        d = abs(b[i]["loss"] - a[i]["loss"]) / max(abs(a[i]["loss"]), 1e-12)
        if d > worst:
            worst, at = d, i + 1
    ma, mb = median_step_ms(a), median_step_ms(b)
    print(f"{name_a}: {len(a)} steps, median step {ma:.2f} ms, loss {a[0]['loss']:.6f} -> {a[steps - 1]['loss']:.6f}")
    print(f"{name_b}: {len(b)} steps, median step {mb:.2f} ms, loss {b[0]['loss']:.6f} -> {b[steps - 1]['loss']:.6f}")
    print(f"{name_b} / {name_a} speed: {ma / mb:.3f}x; worst relative loss difference {worst:.2e} (step {at}), "
          f"tolerance {args.tolerance:.0e}: {'within' if worst <= args.tolerance else 'BEYOND'}")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
