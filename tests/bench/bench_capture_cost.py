#!/usr/bin/env python3
"""What `ultrascope capture` costs a running PyTorch job, measured: a small 2-rank gloo DDP job under torchrun
(capture_cost_job.py) run three ways, one after the other, in one run: (a) as is, (b) with KINETO_USE_DAEMON=1 and
1 s polls but no capture, (c) the same with one `ultrascope capture --steps 5` in the middle. Prints the median and
p90 step time of each, the steps the capture traced (and the other steps while it ran) against the steps outside it,
and the ratios. Every process it starts is killed on every way out (see `Reaper`).

    $ULTRASCOPE_TORCH_PYTHON tests/bench/bench_capture_cost.py --ultrascope build/bin/ultrascope [--steps 300]
"""
import argparse
import atexit
import ctypes
import glob
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIBC = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """preexec_fn: the child gets SIGKILL when the bench dies, even by SIGKILL (PR_SET_PDEATHSIG)."""
    LIBC.prctl(1, signal.SIGKILL)


class Reaper:
    """Every process group and worker pid the bench started; kill_all() runs at exit, on SIGTERM/SIGINT/SIGHUP and
    after each configuration. torchrun starts its workers in sessions of their own, so they are killed by the pids
    they write (and die with torchrun by their own PR_SET_PDEATHSIG)."""

    def __init__(self):
        self.groups = []
        self.pid_dirs = []

    def start(self, cmd, **kw):
        proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=die_with_parent, **kw)
        self.groups.append(proc)
        return proc

    def kill_all(self):
        for d in self.pid_dirs:
            for f in glob.glob(os.path.join(d, "pid*")):
                try:
                    os.kill(int(open(f).read().split()[0]), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        for proc in self.groups:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.groups, self.pid_dirs = [], []


REAPER = Reaper()


def on_signal(signum, _frame):
    raise SystemExit(f"bench_capture_cost: signal {signum}, stopping")


def read_steps(log_dir, ranks):
    """Per step: (wall-clock start, wall-clock end, duration in ms of the slowest rank): a DDP step is as slow as its
    slowest rank."""
    per_rank = []
    for r in range(ranks):
        rows = [line.split() for line in open(os.path.join(log_dir, f"steps{r}.log"))]
        per_rank.append({int(s): (float(end), float(ms)) for s, end, ms in rows})
    common = sorted(set.intersection(*(set(d) for d in per_rank)))
    out = []
    for s in common:
        ms = max(d[s][1] for d in per_rank)
        end = max(d[s][0] for d in per_rank)
        out.append((end - ms / 1e3, end, ms))
    return out


def traced_window(out_dir):
    """The wall-clock span Kineto traced, from the capture's rank files: its `PyTorch Profiler` Trace span (else the
    ProfilerStep# spans, else the Optimizer.step annotations), on the trace's own clock (ts + baseTimeNanoseconds)."""
    spans = {"trace": [], "step": [], "opt": []}
    for f in glob.glob(os.path.join(out_dir, "rank*.json")):
        doc = json.load(open(f))
        base_us = doc.get("baseTimeNanoseconds", 0) / 1e3
        for e in doc["traceEvents"]:
            name = str(e.get("name", ""))
            kind = "trace" if e.get("cat") == "Trace" and name.startswith("PyTorch Profiler") else "step" if \
                name.startswith("ProfilerStep#") else "opt" if name.startswith("Optimizer.step#") else None
            if kind and e.get("ph") == "X":
                spans[kind].append(((base_us + e["ts"]) / 1e6, (base_us + e["ts"] + e["dur"]) / 1e6))
    for kind in ("trace", "step", "opt"):
        if spans[kind]:
            return min(lo for lo, _ in spans[kind]), max(hi for _, hi in spans[kind])
    return None


def overlaps(step, lo, hi, share):
    """Whether at least `share` of the step lies in [lo, hi]."""
    start, end, _ = step
    return min(end, hi) - max(start, lo) >= share * (end - start)


def run_config(args, work, name, daemon, capture):
    log_dir = os.path.join(work, name)
    os.makedirs(log_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KINETO_")}
    if daemon:
        conf = os.path.join(work, "kineto.conf")
        with open(conf, "w") as f:
            f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        # A socket directory of our own: a dynolog or another capture on this machine is neither used nor disturbed.
        env.update(KINETO_USE_DAEMON="1", KINETO_CONFIG=conf, KINETO_IPC_SOCKET_DIR=work)
    port = 29500 + (os.getpid() + len(name)) % 1000 + {"a": 0, "b": 1, "c": 2}[name[0]]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.ranks), "--master-port",
           str(port), os.path.join(HERE, "capture_cost_job.py"), "--steps", str(args.steps), "--log-dir", log_dir]
    REAPER.pid_dirs.append(log_dir)
    job_log = open(os.path.join(log_dir, "job.log"), "w")
    job = REAPER.start(cmd, env=env, stdout=job_log, stderr=subprocess.STDOUT)
    cap = None
    if capture:
        first = os.path.join(log_dir, "steps0.log")
        while not (os.path.exists(first) and sum(1 for _ in open(first)) >= args.capture_at):
            if job.poll() is not None:
                raise SystemExit(f"{name}: the job exited ({job.returncode}) before step {args.capture_at}; "
                                 f"see {job_log.name}")
            time.sleep(0.05)
        out_dir = os.path.join(work, "capture")
        t0 = time.time()
        proc = REAPER.start([args.ultrascope, "capture", "--steps", str(args.capture_steps), "--out", out_dir,
                             "--roundup", str(args.roundup), "--timeout", "60"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        text = proc.communicate(timeout=90)[0]
        t1 = time.time()
        if proc.returncode != 0:
            raise SystemExit(f"{name}: ultrascope capture failed ({proc.returncode}):\n{text}")
        cap = {"start": t0, "end": t1, "window": traced_window(out_dir), "log": text}
    try:
        rc = job.wait(timeout=args.steps * 1.0 + 120)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{name}: the job did not finish; see {job_log.name}")
    if rc != 0:
        raise SystemExit(f"{name}: the job failed ({rc}); see {job_log.name}:\n" + open(job_log.name).read()[-3000:])
    REAPER.kill_all()  # nothing of this configuration runs on into the next
    threads = open(os.path.join(log_dir, "pid0")).read().split()[1]
    return read_steps(log_dir, args.ranks)[args.warmup:], cap, threads


def stats(ms):
    if not ms:
        return "      -        -     0"
    q = sorted(ms)
    return f"{statistics.median(q):7.2f}  {q[min(len(q) - 1, int(0.9 * len(q)))]:7.2f}  {len(q):4d}"


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ultrascope", required=True, help="the ultrascope binary (with the capture command)")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps per configuration")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--capture-steps", type=int, default=5)
    p.add_argument("--capture-at", type=int, default=40, help="(c): start the capture at this step of rank 0")
    p.add_argument("--roundup", type=int, default=100, help="ultrascope capture --roundup")
    p.add_argument("--warmup", type=int, default=10, help="first steps of each configuration left out")
    p.add_argument("--keep", action="store_true", help="keep the step logs and the capture; print where")
    args = p.parse_args()
    if not os.access(args.ultrascope, os.X_OK):
        raise SystemExit(f"--ultrascope {args.ultrascope}: not an executable; build the ultrascope target")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    atexit.register(REAPER.kill_all)
    work = tempfile.mkdtemp(prefix="us-capcost-", dir="/tmp")
    if args.keep:
        print(f"kept in {work}")
    else:
        atexit.register(shutil.rmtree, work, True)
    import torch

    load0 = os.getloadavg()[0]
    began = time.time()
    a, _, threads = run_config(args, work, "a-plain", daemon=False, capture=False)
    b, _, _ = run_config(args, work, "b-daemon", daemon=True, capture=False)
    c, cap, _ = run_config(args, work, "c-capture", daemon=True, capture=True)
    took = time.time() - began
    if not cap["window"]:
        raise SystemExit(f"(c): no traced window in the capture's rank files:\n{cap['log']}")
    lo, hi = cap["window"]
    traced = [x[2] for x in c if overlaps(x, lo, hi, 0.5)]
    running = [x for x in c if overlaps(x, cap["start"], cap["end"], 1e-9)]
    during = [x[2] for x in running if not overlaps(x, lo, hi, 0.5)]
    outside = [x[2] for x in c if not overlaps(x, cap["start"], cap["end"], 1e-9)]

    print(f"machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu_model()}; torch "
          f"{torch.__version__}, {threads} intra-op thread(s) per rank (torchrun's OMP_NUM_THREADS=1); {args.ranks} "
          f"ranks, gloo; load average {load0:.2f} before, {os.getloadavg()[0]:.2f} after; {took:.0f} s in all")
    print(f"{args.steps} steps per configuration, the first {args.warmup} left out; step time = the slower rank's "
          f"perf_counter span of one iteration\n")
    print(f"{'configuration':52s} median      p90  steps   (ms)")
    print(f"{'(a) no KINETO_USE_DAEMON':52s}{stats([x[2] for x in a])}")
    print(f"{'(b) KINETO_USE_DAEMON=1, 1 s polls, no capture':52s}{stats([x[2] for x in b])}")
    print(f"{'(c) the same, all steps':52s}{stats([x[2] for x in c])}")
    print(f"{'(c) outside the capture':52s}{stats(outside)}")
    print(f"{'(c) while `ultrascope capture` ran, not traced':52s}{stats(during)}")
    print(f"{'(c) in the traced window (half or more)':52s}{stats(traced)}")
    def ratio(x, y):
        return f"{statistics.median(x) / statistics.median(y):.3f}" if x and y else "-"

    plain = [x[2] for x in a]
    print(f"\nratios of medians: (b)/(a) {ratio([x[2] for x in b], plain)}; (c outside)/(a) {ratio(outside, plain)}; "
          f"(c traced)/(a) {ratio(traced, plain)}; (c while running, not traced)/(a) {ratio(during, plain)}; "
          f"(c traced)/(c outside) {ratio(traced, outside)}")
    print(f"capture: {cap['end'] - cap['start']:.1f} s from start to files written; the traced window "
          f"{(hi - lo) * 1e3:.0f} ms, {hi - cap['start']:.1f} s after the capture started")


if __name__ == "__main__":
    main()
