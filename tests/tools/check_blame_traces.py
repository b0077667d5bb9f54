#!/usr/bin/env python3
"""Checks that the culprit each tests/data/kineto/blame/<scenario>/meta.json names is visible in the traces
themselves (plain Python, no torch). Per rank and recorded step (ProfilerStep#N on the rank's main thread):
  step     the ProfilerStep#N span
  compute  the union of the main thread's aten::* and fsdp::* cpu_op spans in the step (nested ops count once),
           less any c10d:: op: the rank's work. Waits for peers sit outside these ops (DDP: between ops; FSDP2:
           inside autograd::engine::evaluate_function / RegisterPostBackwardFunctionBackward, which hold its hooks)
  fwd cmp  compute inside the forward: DistributedDataParallel.forward, or FSDP2's first FSDP::pre_forward to its
           last FSDP::post_forward (none for the pipeline)
  wait     step - compute: the main thread's time outside work (waiting for collectives / peers, Python glue)
  gloo:*   the union of the rank's gloo:* spans (gloo:all_reduce, gloo:all_gather, gloo:reduce_scatter, gloo:send,
           gloo:recv ...) within the step: the collectives' wall time, the wait for the slowest peer included
Then the culprit's figures against the median of the other ranks. Exit status 1 where the culprit does not stand
out (or, for "none", where some rank does). Usage: check_blame_traces.py DIR [DIR ...] [--json OUT]"""
import argparse
import gzip
import json
import os
import re
import statistics
import sys


def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


def union_length(spans):
    total, end = 0.0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def subtract(spans, holes):
    """Length of the union of spans minus the part covered by the union of holes."""
    return union_length(spans) - union_length(
        [(max(s, hs), min(e, he)) for s, e in spans for hs, he in holes if hs < e and he > s])


# The ops that are work: ATen's and FSDP2's copy-in/out ops. Not the autograd::engine::evaluate_function wrappers
# and hook nodes around them: FSDP2's pre-/post-backward hooks wait for all-gathers and reduce-scatters inside those.
WORK_PREFIXES = ("aten::", "fsdp::")


def rank_figures(path):
    d = load(path)
    rank = d.get("distributedInfo", {}).get("rank")
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in ev if re.fullmatch(r"ProfilerStep#\d+", e["name"])), key=lambda e: e["ts"])
    main_tid = steps[0]["tid"]
    main = [e for e in ev if e["tid"] == main_tid]
    ops = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in main if e.get("cat") == "cpu_op"]
    gloo = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("gloo:")]
    out = []
    for st in steps:
        s0, s1 = st["ts"], st["ts"] + st["dur"]

        def compute_in(a, b):
            inside = [(s, e, n) for s, e, n in ops if s >= a and e <= b]
            return subtract([(s, e) for s, e, n in inside if n.startswith(WORK_PREFIXES)],
                            [(s, e) for s, e, n in inside if n.startswith("c10d::")])
        compute = compute_in(s0, s1)
        # the forward's window: DistributedDataParallel.forward, or FSDP2's first pre_forward .. last post_forward
        fwd_spans = [(e["ts"], e["ts"] + e["dur"]) for e in main
                     if e["name"] == "DistributedDataParallel.forward" and s0 <= e["ts"] < s1]
        pre = [e["ts"] for e in main if e["name"].startswith("FSDP::pre_forward") and s0 <= e["ts"] < s1]
        post = [e["ts"] + e["dur"] for e in main if e["name"].startswith("FSDP::post_forward") and s0 <= e["ts"] < s1]
        if not fwd_spans and pre and post:
            fwd_spans = [(min(pre), max(post))]
        fwd = sum(compute_in(a, b) for a, b in fwd_spans) if fwd_spans else None
        coll = union_length([(max(a, s0), min(b, s1)) for a, b in gloo if a < s1 and b > s0])
        out.append({"step": st["name"], "step_ms": st["dur"] / 1e3, "compute_ms": compute / 1e3,
                    "fwd_compute_ms": None if fwd is None else fwd / 1e3, "wait_ms": (st["dur"] - compute) / 1e3,
                    "gloo_ms": coll / 1e3})
    return rank, out


KEYS = ("step_ms", "compute_ms", "fwd_compute_ms", "wait_ms", "gloo_ms")


def fmt(v, width):
    return f"{'-':>{width}}" if v is None else f"{v:{width}.1f}"


def check(folder):
    meta = json.load(open(os.path.join(folder, "meta.json")))
    culprit = meta["culprit"]
    per_rank = {}
    for f in meta["trace_files"]:
        rank, figs = rank_figures(os.path.join(folder, f))
        per_rank[rank] = figs
    print(f"== {meta['scenario']}: {meta['ranks']} ranks, culprit "
          f"{json.dumps({k: culprit[k] for k in ('kind', 'rank', 'stage', 'factor')})}")
    print(f"{'rank':>4} {'step':>15} {'step ms':>8} {'compute':>8} {'fwd cmp':>8} {'wait':>8} {'gloo:*':>8}")
    for r in sorted(per_rank):
        for x in per_rank[r]:
            print(f"{r:>4} {x['step']:>15} " + " ".join(fmt(x[k], 8) for k in KEYS))
    mean = {r: {k: (None if figs[0][k] is None else statistics.mean(x[k] for x in figs)) for k in KEYS}
            for r, figs in per_rank.items()}
    print("mean per step: " + "; ".join(f"rank {r}: compute {m['compute_ms']:.0f}, wait {m['wait_ms']:.0f}, "
                                        f"gloo {m['gloo_ms']:.0f} ms" for r, m in sorted(mean.items())))
    summary = {"scenario": meta["scenario"], "culprit": culprit, "mean_per_step_ms": mean}
    top = max(mean, key=lambda r: mean[r]["compute_ms"])
    if culprit["rank"] is not None:
        c = culprit["rank"]
        others = [r for r in mean if r != c]
        med = {k: (None if mean[c][k] is None else statistics.median(mean[r][k] for r in others)) for k in KEYS}
        ratios = {k: (mean[c][k] / med[k] if med[k] else None) for k in KEYS}
        summary.update(culprit_over_median_of_others=ratios, median_of_others_ms=med)
        print(f"culprit rank {c} / median of the others, per step: " +
              ", ".join(f"{k[:-3]} {ratios[k]:.2f}x" for k in KEYS if ratios[k] is not None))
        # Per recorded step: the culprit computes the most and waits the least.
        steps_ok = all(max(per_rank, key=lambda r: per_rank[r][i]["compute_ms"]) == c
                       and min(per_rank, key=lambda r: per_rank[r][i]["wait_ms"]) == c
                       for i in range(len(per_rank[c])))
        ok = top == c and ratios["compute_ms"] > 1.1 and steps_ok
    else:
        comp = [m["compute_ms"] for m in mean.values()]
        spread = max(comp) / statistics.median(comp)
        summary.update(max_compute_over_median=spread)
        print(f"no culprit: largest compute / median compute = {spread:.2f}x (rank {top})")
        ok = spread < 1.1
    print("OK" if ok else "CULPRIT NOT VISIBLE")
    summary["ok"] = ok
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    results = [check(f) for f in args.folders if os.path.isdir(f)]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
