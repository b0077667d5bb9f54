#!/usr/bin/env python3
"""Ultrascope's HTA-style figures next to HTA's own (Holistic Trace Analysis 0.5.0, PyPI) on the same Kineto traces:
per rank, HTA's temporal breakdown, comm/comp overlap and idle-time breakdown beside `ultrascope report DIR --json`'s
`ranks[i].hta`, with the difference in points, each side's wall time, speed and peak RSS. HTA runs in a child process
of its own venv (build/hta-venv, made here if missing: HolisticTraceAnalysis==0.5.0 with pandas<3). `--all` takes every
trace folder under tests/data/kineto/hta (HTA's own test traces, see its README) and the gloo/CPU folders of
tests/data/kineto; `--out` writes HTA's raw figures (tests/data/kineto/hta_reference.json, made with `--all --out`);
`--compare-out` writes both sides' figures per rank with the differences in points, and ultrascope's refusals;
`--parity-md` writes them as one Markdown table per trace folder (the tables of docs/hta-parity.md).
`--synthetic RANKSxMB` (e.g. 2x100) instead compares on a generated run of RANKS files of MB MB of JSON each, written by
build/bin/bench_kineto_open (bench_kineto_read's generator: a GPU step's event mix), gzip: the two sides' wall time
and peak RSS on traces of the size people open.

What HTA 0.5.0 computes (read from its source, hta/analyzers/*.py, hta/common/trace*.py, hta/utils/utils.py), so the
C++ side can match it:
- Parsing: events without `dur` (instants, [memory], flows), of cat "Trace" and `python_function` are dropped. When
  any ts of a file is a JSON float, all are rounded inwards to whole microseconds: ts' = ceil(ts), end' =
  floor(ts + dur), dur' = end' - ts', in float64 arithmetic on the parsed doubles, not on the decimal text: near
  1.7e15 us (epoch microseconds, hta/ns_resolution_trace) a double holds a ts only to 0.25 us, so e.g. a ts written
  ...675.123 is ...675.0 to HTA and rounds to ...675, not ...676. Integer ts are kept. All ranks are shifted by
  the smallest ts over all ranks. The rank is the first match of the regex `"rank":\s+(\d+)` (at least one blank
  after the colon) in the file, read line by line (distributedInfo), else 0 (two files of one rank: the later one
  listed wins); HTA reads only the top level of trace_dir (every name ending in .json or .gz, traces or not).
- GPU events (for the filtering below) = rows with an integer `args.stream` >= 0 and `args.correlation` >= 0
  (kernels, gpu_memcpy, gpu_memset, cuda_sync events carrying a stream, MTIA's mtia_ccp_events, and anything else
  carrying both), plus "Event Sync"/"Context Sync" by name. CPU events = the rest.
- Iteration filtering (Trace._filter_irrelevant_gpu_kernels, only when >1 distinct ProfilerStep names exist):
  per rank, last = the ProfilerStep with the largest ts; CPU events with ts >= last.ts are dropped, and GPU events
  are kept only if their `correlation` matches a kept CPU event (the launching cuda_runtime/cuda_driver call, on any
  thread), once per match. So every analysis below uses all steps but the last one, plus kernels launched before
  the first ProfilerStep; GPU events whose correlation has no CPU event in the file (launched before the profiler
  started: hta/negative_queue_length_values_check has 872, hta/trace_diff_test 614, hta/trace_compare_* 16 each)
  are dropped. With one ProfilerStep or none nothing is filtered.
- Steps (the `steps` figure): HTA's add_iteration gives a GPU row the iteration of its launch only when its stream is
  > 0; stream-0 rows (hta/amd_trace: ROCm) get none, so HTA lists no steps there; traces without ProfilerStep list
  none either.
- Kernel classes (by name): communication = re `^nccl.*Kernel`; memory = `^Memcpy|^Memset|^dma`; computation = none
  of those and not re.match `(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)` (i.e. not containing "Memcpy", not
  starting "Memset", not containing "Sync"); other = the rest.
- Temporal breakdown (per rank, over the kept window, not per iteration): its "GPU events" are every kept row whose
  `args.stream` is not -1, correlation or not, whatever its cat: also cuda_sync rows carrying a stream ("Stream
  Sync", "Context Sync": non-compute; "Stream Wait Event": computation, as no "Sync" is in its name; the
  hta/critical_path_* traces) and CPU ops carrying `args.stream` (hta/triton_example's cpu_op
  "triton_poi_fused_add_cos_sin_0", stream 0, 94 us: computation). kernel_time = end of the last GPU event -
  start of the first (after merging overlapping intervals of all GPU events, all streams); idle = kernel_time -
  merged busy time; compute = merged time of computation kernels; non_compute = kernel_time - compute - idle.
  Percentages are of kernel_time. (HTA labels them "(us)": they are the trace's microseconds.)
- Comm/comp overlap (per rank, whole kept window, a ratio of sums, not a mean of per-iteration ratios):
  merged(comm) and merged(comp) intervals; overlap = time where both run; pct = 100 * overlap / merged comm time,
  rounded to 2 decimals (NaN when there are no comm kernels).
- Idle breakdown (per rank and per stream; only events of cat kernel/gpu_memset/gpu_memcpy (+Memcpy/Memset/mtia)):
  on each stream, kernels sorted by ts, gap = ts - previous kernel's end. Category: host_wait if the launching
  runtime call's ts > previous kernel's end; else kernel_wait if gap < consecutive_kernel_delay (default 30, compared
  with microsecond timestamps, so 30 us although the docstring says ns); else other. The first kernel of a stream has
  no gap. Ranks' totals here are sums over streams (so they can exceed the temporal idle time, which merges streams).
"""
import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HTA_VERSION = "0.5.0"
NOT_TRACES = ("meta.json", "scenarios.json", "hta_reference.json")
DEFAULT_DIRS = ["tests/data/kineto/hta/trace_filter_sampled", "tests/data/kineto/hta/nccl_parser_config",
                "tests/data/kineto/ddp", "tests/data/kineto/pipeline_1f1b"]
# The gloo/CPU runs of tests/data/kineto (no kernels: HTA's kernel-based figures are empty there) that --all adds to
# every folder of HTA's own traces (tests/data/kineto/hta/*).
CPU_DIRS = ["tests/data/kineto/ddp", "tests/data/kineto/fsdp2", "tests/data/kineto/pipeline_gpipe",
            "tests/data/kineto/pipeline_1f1b", "tests/data/kineto/pipeline_interleaved",
            "tests/data/kineto/tp/iteration_4", "tests/data/kineto/dp2_tp2/iteration_4"]


def all_dirs():
    """Every folder of tests/data/kineto/hta holding trace files, then CPU_DIRS (repository-relative)."""
    root = os.path.join(REPO, "tests/data/kineto/hta")
    hta = sorted(os.path.relpath(os.path.join(root, d), REPO) for d in os.listdir(root)
                 if os.path.isdir(os.path.join(root, d)) and trace_files(os.path.join(root, d)))
    return hta + CPU_DIRS


# ---------------- the HTA child (runs inside the HTA venv) ----------------

def hta_child(stage_dir, out_path):
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis
    timings = {"import_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=stage_dir)
    timings["parse_s"] = time.perf_counter() - t0
    ranks = sorted(analyzer.t.get_ranks())
    res = {"ranks": ranks, "timings": timings, "steps": {}, "gpu_event_categories": {}}
    sym = analyzer.t.symbol_table.get_sym_table()
    for r in ranks:
        df = analyzer.t.get_trace(r)
        gpu = df[df["stream"].ge(0) & df["correlation"].ge(0)]
        res["steps"][str(r)] = sorted(int(i) for i in gpu["iteration"].unique() if i >= 0) if "iteration" in gpu else []
        res["gpu_event_categories"][str(r)] = {sym[int(c)]: int(n) for c, n in gpu["cat"].value_counts().items()}
    analyses = {
        "temporal_breakdown": lambda: analyzer.get_temporal_breakdown(visualize=False),
        "comm_comp_overlap": lambda: analyzer.get_comm_comp_overlap(visualize=False),
        "idle_time_breakdown": lambda: analyzer.get_idle_time_breakdown(ranks=ranks, visualize=False)[0],
    }
    for name, run in analyses.items():
        t0 = time.perf_counter()
        try:
            res[name] = json.loads(run().to_json(orient="records"))
        except Exception as e:  # noqa: BLE001 - HTA fails on traces without kernels; the error is the result
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        timings[f"{name}_s"] = time.perf_counter() - t0
    import importlib.metadata as md
    res["versions"] = {p: md.version(p) for p in ("HolisticTraceAnalysis", "pandas", "numpy")}
    with open(out_path, "w") as f:
        json.dump(res, f, default=str)


# ---------------- the driver ----------------

def run_measured(cmd, stdout_path=None):
    """Runs cmd; returns (exit code, wall s, peak RSS MiB of it and its reaped children, stderr text)."""
    out = open(stdout_path, "w") if stdout_path else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if stdout_path:
        out.close()
    return proc.returncode, wall, usage.ru_maxrss / 1024.0, err


def ensure_hta_venv(venv):
    py = os.path.join(venv, "bin", "python")
    probe = f"import importlib.metadata as m; assert m.version('HolisticTraceAnalysis') == '{HTA_VERSION}'"
    if subprocess.run([py, "-c", probe], capture_output=True).returncode != 0:
        print(f"making {venv} with HolisticTraceAnalysis=={HTA_VERSION} from PyPI", flush=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "--quiet", f"HolisticTraceAnalysis=={HTA_VERSION}", "pandas<3"],
                       check=True)
    return py


def trace_files(d):
    found = []
    for root, _, files in os.walk(d):
        for f in files:
            if (f.endswith(".json") or f.endswith(".json.gz")) and f not in NOT_TRACES \
                    and not f.startswith("memory_timeline"):
                found.append(os.path.join(root, f))
    return sorted(found)


def json_megabytes(files):
    total = 0
    for f in files:
        with (gzip.open(f, "rb") if f.endswith(".gz") else open(f, "rb")) as fh:
            while chunk := fh.read(1 << 20):
                total += len(chunk)
    return total / 1e6


def run_hta(py, d, files, tmp):
    stage = tempfile.mkdtemp(dir=tmp)  # HTA reads one folder level and takes every *.json there: traces only
    for f in files:
        os.symlink(os.path.abspath(f), os.path.join(stage, os.path.basename(f)))
    out = os.path.join(tmp, "hta.json")
    rc, wall, rss, err = run_measured([py, os.path.abspath(__file__), "--hta-child", stage, out])
    if rc != 0:
        return {"error": f"HTA exited {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}", "wall_s": wall,
                "peak_rss_mib": rss}
    res = json.load(open(out))
    res.update(wall_s=wall, peak_rss_mib=rss)
    return res


def hta_rank_figures(res, rank):
    """HTA's figures for one rank in the shape of ultrascope's ranks[i].hta."""
    def row(name):
        rows = res.get(name)
        return next((x for x in rows if x.get("rank") == rank), None) if isinstance(rows, list) else None
    tb, ov = row("temporal_breakdown"), row("comm_comp_overlap")
    idle = res.get("idle_time_breakdown")
    fig = {"steps": res["steps"].get(str(rank), [])}
    if tb:
        fig.update(kernel_time_us=tb["kernel_time(us)"], idle_time_us=tb["idle_time(us)"],
                   compute_time_us=tb["compute_time(us)"], non_compute_time_us=tb["non_compute_time(us)"])
    if ov:
        fig["comp_comm_overlap_pct"] = ov["comp_comm_overlap_pctg"]
    if isinstance(idle, list):
        cats = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
        for x in idle:
            if x["rank"] == rank and x["idle_category"] in cats:
                cats[x["idle_category"]] += x["idle_time"] or 0.0
        fig["idle_breakdown"] = {f"{k}_us": v for k, v in cats.items()}
    return fig


def run_ultrascope(binary, d, tmp):
    if not os.path.exists(binary):
        return {"error": f"no binary at {binary} (ninja -C build ultrascope)"}
    out = os.path.join(tmp, "ultrascope.json")
    rc, wall, rss, err = run_measured([binary, "report", d, "--json"], stdout_path=out)
    lines = [x for x in err.strip().splitlines() if x.strip()]
    if rc != 0:
        return {"error": f"exit {rc}: {lines[-1] if lines else 'no message'}", "wall_s": wall, "stderr": lines}
    try:
        rep = json.load(open(out))
    except json.JSONDecodeError as e:
        return {"error": f"stdout is not JSON ({e})", "wall_s": wall}
    ranks, listed = {}, []
    for i, r in enumerate(rep.get("ranks", [])):
        if isinstance(r, dict):
            listed.append(int(r.get("rank", i)))
            if isinstance(r.get("hta"), dict):
                ranks[int(r.get("rank", i))] = r["hta"]
    warnings = [str(w) for w in rep.get("warnings", [])]
    if not ranks:
        return {"error": f"the report has no ranks[].hta object (ranks listed: {listed})", "wall_s": wall,
                "peak_rss_mib": rss, "stderr": lines, "warnings": warnings}
    return {"ranks": ranks, "wall_s": wall, "peak_rss_mib": rss, "stderr": lines, "warnings": warnings}


METRICS = ["kernel_time_us", "idle_time_us", "compute_time_us", "non_compute_time_us", "comp_comm_overlap_pct",
           "idle_breakdown.host_wait_us", "idle_breakdown.kernel_wait_us", "idle_breakdown.other_us"]


def get(fig, key):
    for part in key.split("."):
        fig = fig.get(part) if isinstance(fig, dict) else None
    return fig


def as_points(fig, key):
    """Percent points: the overlap as is, times as % of that side's kernel_time."""
    v = get(fig, key)
    if v is None or key.endswith("_pct"):
        return v
    kt = get(fig, "kernel_time_us")
    return 100.0 * v / kt if kt else None


def fmt(v, width=12):
    return f"{v:>{width}.2f}" if isinstance(v, (int, float)) and v == v else f"{'-':>{width}}"


def print_dir(d, mb, hta, us):
    print(f"\n=== {d}  ({mb:.2f} MB of JSON)")
    if "error" in hta:
        print(f"  HTA: {hta['error']}")
    else:
        t = hta["timings"]
        print(f"  HTA: parse {t['parse_s']:.2f} s ({mb / t['parse_s']:.2f} MB/s), temporal {t['temporal_breakdown_s']:.2f} s,"
              f" overlap {t['comm_comp_overlap_s']:.2f} s, idle {t['idle_time_breakdown_s']:.2f} s; whole child "
              f"{hta['wall_s']:.2f} s (with import), peak RSS {hta['peak_rss_mib']:.0f} MiB; "
              + ", ".join(f"{k} {v}" for k, v in hta["versions"].items()))
        for name in ("temporal_breakdown", "comm_comp_overlap", "idle_time_breakdown"):
            if isinstance(hta.get(name), dict):
                print(f"  HTA {name}: {hta[name]['error']}")
    if "error" in us:
        print(f"  ultrascope: not available ({us['error']})")
    else:
        print(f"  ultrascope: {us['wall_s']:.2f} s ({mb / us['wall_s']:.2f} MB/s), peak RSS {us['peak_rss_mib']:.0f} MiB")
    for w in us.get("warnings", []):
        print(f"  ultrascope warning: {w}")
    if "error" in hta:
        return
    for rank in hta["ranks"]:
        h = hta_rank_figures(hta, rank)
        u = us.get("ranks", {}).get(rank) if "error" not in us else None
        if "kernel_time_us" not in h and not u:
            print(f"  rank {rank}: no GPU kernels (a CPU trace), so HTA's kernel-based figures are empty "
                  f"(overlap {h.get('comp_comm_overlap_pct')})")
            continue
        print(f"  rank {rank}: HTA steps {h['steps']}" + (f", ultrascope steps {u.get('steps')}" if u else ""))
        print(f"    {'metric':<30}{'HTA':>12}{'HTA pts':>10}{'ultrascope':>12}{'us pts':>10}{'diff pts':>10}")
        for m in METRICS:
            hp, up = as_points(h, m), as_points(u, m) if u else None
            diff = up - hp if isinstance(hp, (int, float)) and isinstance(up, (int, float)) else None
            print(f"    {m:<30}{fmt(get(h, m))}{fmt(hp, 10)}{fmt(get(u, m) if u else None)}{fmt(up, 10)}"
                  f"{fmt(diff, 10)}")


def compare_entry(hta, us):
    """Both sides' figures per rank for --compare-out: HTA's, ultrascope's, and ultrascope - HTA in points."""
    entry = {"ultrascope_error": us.get("error"), "ultrascope_stderr": us.get("stderr", []),
             "ultrascope_warnings": us.get("warnings", [])}
    if "error" in hta:
        entry["hta_error"] = hta["error"]
        return entry
    entry["hta_errors"] = {n: hta[n]["error"] for n in ("temporal_breakdown", "comm_comp_overlap",
                                                        "idle_time_breakdown") if isinstance(hta.get(n), dict)}
    entry["ranks"] = {}
    for rank in hta["ranks"]:
        h = hta_rank_figures(hta, rank)
        u = us.get("ranks", {}).get(rank)
        row = {"hta": h, "ultrascope": u, "diff_pts": {}}
        for m in METRICS:
            hp, up = as_points(h, m), as_points(u, m) if u else None
            both = isinstance(hp, (int, float)) and isinstance(up, (int, float)) and hp == hp and up == up
            row["diff_pts"][m] = round(up - hp, 4) if both else None
        entry["ranks"][str(rank)] = row
    return entry


def parity_markdown(compare, command):
    """One Markdown table per folder: each figure as HTA gives it and as ultrascope does, equal or not."""
    def cell(v):
        if v is None:
            return "none"
        if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return str(v)
    out = [f"Written by `{command}`.", ""]
    for d, entry in compare["dirs"].items():
        out += [f"### `{d}`", ""]
        if entry.get("hta_error"):
            out += [f"HTA: {entry['hta_error']}", ""]
            continue
        if entry.get("hta_errors"):
            out += ["HTA: " + "; ".join(f"{k}: {v}" for k, v in sorted(entry["hta_errors"].items())) + ". ultrascope: "
                    + (entry.get("ultrascope_error") or "figures") + ".", ""]
            if all(not (r.get("ultrascope") or {}) for r in entry["ranks"].values()):
                continue
        out += ["| rank | figure | HTA 0.5.0 | ultrascope | equal |", "| --- | --- | --- | --- | --- |"]
        for rank, row in entry["ranks"].items():
            h, u = row["hta"], row["ultrascope"] or {}
            for m in ["steps"] + METRICS:
                hv, uv = (h.get("steps"), u.get("steps")) if m == "steps" else (get(h, m), get(u, m))
                if m == "comp_comm_overlap_pct" and isinstance(uv, float):
                    uv = round(uv, 2)  # HTA rounds it to two decimals
                same = hv == uv or (isinstance(hv, (int, float)) and isinstance(uv, (int, float))
                                    and abs(hv - uv) < 1e-6)
                out.append(f"| {rank} | {m} | {cell(hv)} | {cell(uv)} | {'yes' if same else '**no**'} |")
        out.append("")
    return "\n".join(out)


def machine_line():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, python {platform.python_version()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*", help="trace folders (one file per rank); default: " + " ".join(DEFAULT_DIRS))
    ap.add_argument("--all", action="store_true", help="every folder of tests/data/kineto/hta, then the CPU runs")
    default_binary = os.path.join(REPO, "build/bin/ultrascope")
    if not os.path.exists(default_binary) and os.path.exists(os.path.join(REPO, "build-gpu/bin/ultrascope")):
        default_binary = os.path.join(REPO, "build-gpu/bin/ultrascope")
    ap.add_argument("--ultrascope", default=default_binary, help="the binary (default build/bin, else build-gpu/bin)")
    ap.add_argument("--hta-venv", default=os.path.join(REPO, "build/hta-venv"))
    ap.add_argument("--synthetic", metavar="RANKSxMB", help="compare on a generated run instead, e.g. 2x100")
    ap.add_argument("--out", help="write HTA's raw figures here as JSON (tests/data/kineto/hta_reference.json)")
    ap.add_argument("--compare-out", help="write both sides' figures per rank and their differences here as JSON")
    ap.add_argument("--parity-md", help="write both sides' figures as one Markdown table per folder here")
    ap.add_argument("--hta-child", nargs=2, metavar=("STAGE_DIR", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hta_child:
        return hta_child(*args.hta_child)
    if args.all and args.dirs:
        ap.error("--all takes no folders")
    command = "python3 tests/bench/bench_vs_hta.py " + ("--all" if args.all else " ".join(args.dirs or DEFAULT_DIRS))
    args.dirs = all_dirs() if args.all else (args.dirs or DEFAULT_DIRS)
    py = ensure_hta_venv(args.hta_venv)
    print(f"machine: {machine_line()}")
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(f"ultrascope: {args.ultrascope} (source at commit {head.stdout.strip() or '?'}); HTA {HTA_VERSION}")
    reference = {"hta_version": HTA_VERSION, "machine": machine_line(), "dirs": {},
                 "command": command + " --out FILE",
                 "note": "HTA's own figures (TraceAnalysis on each folder's trace files); per_rank has them in the "
                         "shape of ultrascope report --json's ranks[i].hta; times are the traces' microseconds"}
    compare = {"hta_version": HTA_VERSION, "ultrascope": args.ultrascope, "machine": machine_line(), "dirs": {},
               "note": "per rank: HTA's figures, ultrascope's (report --json ranks[i].hta) and ultrascope - HTA in "
                       "percent points (times as % of each side's kernel_time, the overlap as is)"}
    with tempfile.TemporaryDirectory(prefix="bench-vs-hta-") as tmp:
        if args.synthetic:
            ranks, mb_each = args.synthetic.lower().split("x")
            gen = os.path.join(os.path.dirname(args.ultrascope), "bench_kineto_open")
            d = os.path.join(tmp, f"synthetic-{ranks}x{mb_each}")
            subprocess.run([gen, ranks, mb_each, d, "--keep", "--write-only"], check=True)
            for f in os.listdir(d):  # the generator's size notes: not traces
                if not (f.endswith(".json") or f.endswith(".json.gz")):
                    os.remove(os.path.join(d, f))
            args.dirs = [d]
        for d in args.dirs:
            files = trace_files(d)
            if not files:
                print(f"\n=== {d}: no trace files, skipped")
                continue
            mb = json_megabytes(files)
            hta = run_hta(py, d, files, tempfile.mkdtemp(dir=tmp))
            us = run_ultrascope(args.ultrascope, d, tempfile.mkdtemp(dir=tmp))
            print_dir(d, mb, hta, us)
            rel = os.path.relpath(os.path.abspath(d), REPO)
            entry = {"files": [os.path.relpath(f, d) for f in files], "json_mb": round(mb, 3)}
            if "error" in hta:
                entry["error"] = hta["error"]
            else:
                entry.update({k: hta[k] for k in ("ranks", "steps", "gpu_event_categories", "temporal_breakdown",
                                                  "comm_comp_overlap", "idle_time_breakdown", "versions")})
                entry["per_rank"] = {str(r): hta_rank_figures(hta, r) for r in hta["ranks"]}
            reference["dirs"][rel] = entry
            compare["dirs"][rel] = compare_entry(hta, us)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(reference, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"\nHTA's figures written to {args.out}")
    if args.compare_out:
        with open(args.compare_out, "w") as f:
            json.dump(compare, f, indent=1, sort_keys=True, default=str)
            f.write("\n")
        print(f"both sides' figures written to {args.compare_out}")
    if args.parity_md:
        with open(args.parity_md, "w") as f:
            f.write(parity_markdown(compare, command) + "\n")
        print(f"the Markdown tables written to {args.parity_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
