#!/usr/bin/env python3
"""Pipeline bubbles measured against theory: pp 2 (one core per rank) on the small preset with m = 2, 4, 8, 16
micro-batches for every schedule, and pp 4 (4 ranks on the 2 cores: a reference for the shape, not for speed).
The measured bubble is the busiest stage's idle time inside the pipeline's window over its op time
(`ultrascope report --json`, "pipeline"); theory is (pp-1)/m, (pp-1)/(v m) interleaved, and about a third of that
for ZB-H1; "simulated" runs the same schedule on an idealised machine (forward 1, backward 2).

    python3 tests/bench/bench_pp.py [--build build] [--steps 3] [--quick]
"""
import argparse
import json
import os
import subprocess
import tempfile


def run(build, pp, schedule, m, steps, layers):
    chunks = 2 if schedule == "interleaved" else 1
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t.ustrace")
        subprocess.run([os.path.join(build, "bin", "ultrascope"), "run", "-n", str(pp), "--trace", trace,
                        "--pp", str(pp), "--pp-schedule", schedule, "--pp-chunks", str(chunks),
                        "--grad-accum", str(m), "--preset", "small", "--layers", str(layers),
                        "--steps", str(steps)], check=True, capture_output=True)
        out = subprocess.run([os.path.join(build, "bin", "ultrascope"), "report", trace, "--json"], check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="pp 2 only, m = 4 and 8")
    a = ap.parse_args()
    print("small preset (h 256, seq 128, micro-batch 8), fp32; measured over the steady steps "
          f"(steps 2..{a.steps}); OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"{'pp':>2} {'schedule':<12} {'m':>3} | {'measured':>8} {'theory':>7} {'simulated':>9} | "
          f"{'meas/theory':>11} | {'in flight (stage 0)':>19} | {'tokens/s':>8}")
    configs = [(2, [4, 8] if a.quick else [2, 4, 8, 16], 4)]
    if not a.quick:
        configs.append((4, [4, 8, 16], 8))
    for pp, ms, layers in configs:
        for schedule in ["afab", "1f1b", "interleaved", "zb1"]:
            for m in ms:
                rep = run(a.build, pp, schedule, m, a.steps, layers)
                p = rep["pipeline"]
                r0 = rep["ranks"][0]
                ratio = p["bubble_fraction"] / p["bubble_fraction_formula"] if p["bubble_fraction_formula"] else 0
                print(f"{pp:>2} {schedule:<12} {m:>3} | {p['bubble_fraction']:>8.3f} {p['bubble_fraction_formula']:>7.3f} "
                      f"{p['bubble_fraction_predicted']:>9.3f} | {ratio:>11.2f} | "
                      f"{r0['micro_batches_in_flight']:>8} (pred {r0['micro_batches_in_flight_predicted']:>2}) | "
                      f"{rep['throughput']['tokens_per_s']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
