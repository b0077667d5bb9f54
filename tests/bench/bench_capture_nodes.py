#!/usr/bin/env python3
"""Issue 55's scale figure: a PyTorch job of many tiny ranks on 2 emulated nodes (`ultrascope nodes up 2`, a torchrun
of --per-node ranks on each through `ultrascope nodes exec`, gloo DDP, one intra-op thread a rank), captured once
with `ultrascope capture --nodes`, then `ultrascope report DIR`. Prints how long after the captured steps ended (the
last rank's traced window end, on the traces' own wall clock) the folder was written and the report was done, with
1 s polls (KINETO_CONFIG). Needs root (the nodes) and a Python with torch. Everything it starts ends with
`ultrascope nodes down` on every way out (which ends what runs on the nodes).

  sudo $ULTRASCOPE_TORCH_PYTHON tests/bench/bench_capture_nodes.py --ultrascope build/bin/ultrascope --per-node 32
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "..", "data", "capture_protocol", "ddp_job.py")


def mem_available_gib():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def traced_end(out_dir):
    """The latest end of a rank's traced window (its `PyTorch Profiler` Trace span), wall clock, seconds."""
    end = None
    for f in glob.glob(os.path.join(out_dir, "rank*.json")):
        doc = json.load(open(f))
        base_us = doc.get("baseTimeNanoseconds", 0) / 1e3
        for e in doc["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") == "Trace" and str(e.get("name", "")).startswith("PyTorch Profiler"):
                t = (base_us + e["ts"] + e["dur"]) / 1e6
                end = t if end is None else max(end, t)
    return end


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ultrascope", default="build/bin/ultrascope")
    ap.add_argument("--per-node", type=int, default=32, help="ranks on each of the 2 nodes")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--roundup", type=int, default=20)
    ap.add_argument("--start-timeout", type=float, default=600, help="seconds for every rank to poll")
    ap.add_argument("--gib-per-rank", type=float, default=0.25, help="memory a tiny torch rank takes (measured here)")
    ap.add_argument("--min-free-gib", type=float, default=2.0,
                    help="stop the job when MemAvailable falls below this (the machine is shared)")
    args = ap.parse_args()
    us = os.path.abspath(args.ultrascope)
    need = 2 * args.per_node * args.gib_per_rank + args.min_free_gib
    if mem_available_gib() < need:
        sys.exit(f"bench_capture_nodes: {2 * args.per_node} ranks need about {need:.1f} GiB available, this machine has "
                 f"{mem_available_gib():.1f}: fewer --per-node, or wait for a quieter machine")
    work = tempfile.mkdtemp(prefix="bench-capture-nodes-")
    env = dict(os.environ, ULTRASCOPE_NODES_DIR=os.path.join(work, "run"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench_capture_nodes: SIGTERM, stopping"))
    logs = []
    try:
        subprocess.run([us, "nodes", "up", "2"], env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(work, "kineto.conf"), "w") as f:
            f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        job_env = dict(env, KINETO_USE_DAEMON="1", KINETO_CONFIG=os.path.join(work, "kineto.conf"), OMP_NUM_THREADS="1")
        mem_before = mem_available_gib()
        low = []

        def watch():  # never let the job push the shared machine into the OOM killer
            while not low and not done.is_set():
                if mem_available_gib() < args.min_free_gib:
                    low.append(mem_available_gib())
                    subprocess.run([us, "nodes", "down"], env=env, capture_output=True)
                time.sleep(0.5)

        done = threading.Event()
        threading.Thread(target=watch, daemon=True).start()
        t_launch = time.time()
        for k in range(2):
            log = open(os.path.join(work, f"job{k}.log"), "w")
            logs.append(log)
            subprocess.Popen([us, "nodes", "exec", str(k), "--", sys.executable, "-m", "torch.distributed.run",
                              "--nnodes", "2", "--node-rank", str(k), "--nproc-per-node", str(args.per_node),
                              "--master-port", "29581", JOB, "--seconds", "3600", "--sleep-ms", "0"],
                             env=job_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # Every rank polling on both nodes: the agents' job lists name them
        want = args.per_node
        while True:
            listed = subprocess.run([us, "capture", "--nodes", "--list"], env=env, capture_output=True, text=True)
            counts = [int(m) for m in re.findall(r"(\d+) of (?:\d+|\?) ranks", listed.stdout)]
            if len(counts) == 2 and all(c >= want for c in counts):
                break
            if low or time.time() - t_launch > args.start_timeout:
                sys.exit(f"bench_capture_nodes: not every rank polled within {args.start_timeout:g} s:\n{listed.stdout}")
            time.sleep(2)
        t_polling = time.time()
        mem_after = mem_available_gib()
        out = os.path.join(work, "captured")
        t0 = time.time()
        cap = subprocess.run([us, "capture", "--nodes", "--steps", str(args.steps), "--out", out, "--timeout", "600",
                              "--roundup", str(args.roundup)], env=env, capture_output=True, text=True)
        t_written = time.time()
        if low:
            sys.exit(f"bench_capture_nodes: MemAvailable fell to {low[0]:.1f} GiB: the job was stopped; use fewer --per-node")
        if cap.returncode != 0:
            tails = "".join(f"\njob{k}.log:\n" + open(os.path.join(work, f"job{k}.log")).read()[-3000:] for k in range(2))
            sys.exit(f"bench_capture_nodes: capture failed ({cap.returncode}):\n{cap.stdout}\n{cap.stderr[-3000:]}{tails}")
        rep = subprocess.run([us, "report", out], capture_output=True, text=True)
        t_report = time.time()
        if rep.returncode != 0:
            sys.exit(f"bench_capture_nodes: report failed:\n{rep.stdout}\n{rep.stderr}")
        end = traced_end(out)
        files = glob.glob(os.path.join(out, "rank*.json"))
        size_mb = sum(os.path.getsize(f) for f in files) / 1e6
        print(f"ranks: {len(files)} on 2 emulated nodes ({args.per_node} each), {size_mb:.1f} MB of rank files")
        print(f"job start to every rank polling: {t_polling - t_launch:.1f} s; memory the job took: "
              f"{mem_before - mem_after:.1f} GiB (MemAvailable {mem_before:.1f} -> {mem_after:.1f} GiB)")
        print(f"capture: {t_written - t0:.1f} s from its start to the folder written")
        print(f"captured steps' end -> folder written: {t_written - end:.1f} s")
        print(f"captured steps' end -> `ultrascope report DIR` done: {t_report - end:.1f} s "
              f"(the report itself {t_report - t_written:.1f} s)")
        print("capture's last lines:\n  " + "\n  ".join(cap.stdout.strip().splitlines()[-3:]))
    finally:
        if "done" in locals():
            done.set()
        subprocess.run([us, "nodes", "down"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for log in logs:
            log.close()
        if os.environ.get("BENCH_KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
