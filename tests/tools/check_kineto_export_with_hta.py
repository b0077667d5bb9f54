#!/usr/bin/env python3
"""Exports an Ultrascope trace to Kineto JSON (ultrascope export --kineto), runs Holistic Trace Analysis on the
folder, and compares HTA's temporal breakdown, overlap and idle breakdown with our own (`ultrascope report --json`,
ranks[i].hta): percentages within --tolerance points. Needs HTA (not run by ctest; CI has none):

  python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0
  /tmp/hta-venv/bin/python tests/tools/check_kineto_export_with_hta.py build/bin/ultrascope tests/data/gpu/small-h100.ustrace

The committed H100 traces have no NCCL kernels (MPI with host staging), so the overlap is checked on a synthetic
trace with NCCL kernels, sub-microsecond times and memcpys that a hidden unit test writes:

  US_HTA_FIXTURE=/tmp/nccl.ustrace build/bin/ultrascope-tests "[hta-fixture]"
  /tmp/hta-venv/bin/python tests/tools/check_kineto_export_with_hta.py build/bin/ultrascope /tmp/nccl.ustrace

Exit status 0 when every figure agrees, 1 otherwise, 2 on a usage error.
"""
import argparse
import json
import logging
import subprocess
import sys
import tempfile


def ours(ultrascope, trace):
    report = json.loads(subprocess.run([ultrascope, "report", trace, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    return {r["rank"]: r["hta"] for r in report["ranks"] if "hta" in r}


def pct(part, whole):
    return 100.0 * part / whole if whole else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ultrascope", help="the ultrascope binary")
    ap.add_argument("trace", help="a trace with device spans: a .ustrace, or PyTorch profiler traces (a folder)")
    ap.add_argument("--tolerance", type=float, default=1.0, help="percentage points (default 1)")
    ap.add_argument("--keep", help="export into this folder and keep it")
    args = ap.parse_args()
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("Holistic Trace Analysis is not installed here: pip install HolisticTraceAnalysis==0.5.0", file=sys.stderr)
        return 2
    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = args.keep or tempfile.mkdtemp(prefix="us-kineto-")
    subprocess.run([args.ultrascope, "export", args.trace, "--kineto", folder], check=True)
    mine = ours(args.ultrascope, args.trace)
    if not mine:
        print(f"{args.trace}: no rank has device spans (no hta figures to compare)", file=sys.stderr)
        return 2

    analyzer = TraceAnalysis(trace_dir=folder)
    temporal = analyzer.get_temporal_breakdown(visualize=False).set_index("rank")
    overlap = analyzer.get_comm_comp_overlap(visualize=False).set_index("rank")
    idle, _ = analyzer.get_idle_time_breakdown(ranks=list(mine), visualize=False)

    failures = 0
    print(f"{'rank':>4} {'figure':<22} {'HTA':>12} {'ours':>12}")

    def compare(rank, what, theirs, our, tolerance):
        nonlocal failures
        bad = our is None or abs(theirs - our) > tolerance
        failures += bad
        print(f"{rank:>4} {what:<22} {theirs:>12.2f} {our if our is None else round(our, 2):>12} {'MISMATCH' if bad else ''}")

    for rank, h in sorted(mine.items()):
        t = temporal.loc[rank]
        k = h["kernel_time_us"]
        print(f"{rank:>4} {'kernel_time_us':<22} {t['kernel_time(us)']:>12.0f} {k:>12.0f}")
        compare(rank, "idle %", t["idle_time_pctg"], pct(h["idle_time_us"], k), args.tolerance)
        compare(rank, "compute %", t["compute_time_pctg"], pct(h["compute_time_us"], k), args.tolerance)
        compare(rank, "non-compute %", t["non_compute_time_pctg"], pct(h["non_compute_time_us"], k), args.tolerance)
        if rank in overlap.index and h["comp_comm_overlap_pct"] is not None:
            compare(rank, "comp-comm overlap %", overlap.loc[rank]["comp_comm_overlap_pctg"], h["comp_comm_overlap_pct"],
                    args.tolerance)
        elif rank in overlap.index:
            print(f"{rank:>4} {'comp-comm overlap %':<22} {overlap.loc[rank]['comp_comm_overlap_pctg']:>12} {'unknown':>12}")
        # The idle breakdown, summed over streams, as shares of the streams' idle time.
        ib = h["idle_breakdown"]
        if ib["host_wait_us"] is None:
            print(f"{rank:>4} idle breakdown: unknown on our side (no launch times)")
            continue
        r = idle[idle["rank"] == rank].groupby("idle_category")["idle_time"].sum()
        total_theirs = float(r.sum())
        total_ours = ib["host_wait_us"] + ib["kernel_wait_us"] + ib["other_us"]
        for cat, key in (("host_wait", "host_wait_us"), ("kernel_wait", "kernel_wait_us"), ("other", "other_us")):
            compare(rank, f"idle {cat} %", pct(float(r.get(cat, 0.0)), total_theirs), pct(ib[key], total_ours),
                    args.tolerance)
    print("agree" if failures == 0 else f"{failures} figure(s) differ by more than {args.tolerance} point(s)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
