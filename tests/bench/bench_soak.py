#!/usr/bin/env python3
"""Hours of use: the GUI attached to a live run for a long time. Starts the GUI (under Xvfb when there is no
display) with its default dp 2 x pp 2 run of the small preset and far more steps than it will reach, and every
--every seconds records the GUI's resident memory (/proc), the frame build time the GUI measures itself
(ULTRASCOPE_FRAME_STATS_S: median, 99th percentile and max of update + layout + draw lists, without the swap), the
trace store's bytes against its cap, and the events the ranks dropped. At the end it stops the GUI with SIGTERM and
checks that no process of the run is left.

Target (issue 15): resident memory flat once the store's cap is reached, frame build <= 16 ms throughout. A small
--store-cap-mib makes the cap arrive within the run.

    python3 tests/bench/bench_soak.py [--build build] [--minutes 20] [--every 60] [--store-cap-mib 16]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from bench_common import MPI_ENV, cpu_features

ENV = dict(MPI_ENV, LIBGL_ALWAYS_SOFTWARE="1")


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None


def gui_pid(parent):
    """The ultrascope process under xvfb-run (or the process itself without Xvfb)."""
    out = subprocess.run(["pgrep", "-f", "-P", str(parent), "."], capture_output=True, text=True).stdout.split()
    for pid in [parent] + [int(p) for p in out]:
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"/ultrascope"):
            return pid
    for p in out:
        found = gui_pid(int(p))
        if found:
            return found
    return None


def end_session(proc):
    """Whatever this bench started (xvfb-run and its Xvfb among them) ends with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--every", type=float, default=60)
    ap.add_argument("--store-cap-mib", type=int, default=16)
    ap.add_argument("--preset", default="small")
    args = ap.parse_args()
    gui = os.path.abspath(os.path.join(args.build, "bin", "ultrascope"))
    work = tempfile.mkdtemp(prefix="us-soak-")
    marker = os.path.join(work, "soak-data.txt")
    # the default corpus under a path of its own: the marker that finds every process of this run
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "corpus", "default.txt"),
                marker)
    cmd = [gui, "--preset", args.preset, "--steps", "100000000", "--data", marker, "--store-cap-mib", str(args.store_cap_mib)]
    if not os.environ.get("DISPLAY"):
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1280x800x24"] + cmd
    env = dict(ENV, ULTRASCOPE_FRAME_STATS_S=str(args.every))
    log_path = os.path.join(work, "gui.log")
    log = open(log_path, "w")
    print(f"# soak: {cpu_features()}, {os.cpu_count()} cores; GUI + dp 2 x pp 2 "
          f"{args.preset} run for {args.minutes} min; store cap {args.store_cap_mib} MiB")
    print(f"# {' '.join(cmd)}")
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        soak(args, proc, log_path)
    finally:
        end_session(proc)
        shutil.rmtree(work, ignore_errors=True)


def soak(args, proc, log_path):
    t0 = time.time()
    pid = None
    seen = 0
    print(f"{'min':>5} {'GUI RSS MiB':>11} {'store MiB':>9} {'at cap':>6} {'frames':>6} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7}")
    rows = []
    while time.time() - t0 < args.minutes * 60 and proc.poll() is None:
        time.sleep(2)
        pid = pid or gui_pid(proc.pid)
        text = open(log_path).read()
        stats = re.findall(r"frame_stats frames (\d+) p50_ms ([\d.]+) p99_ms ([\d.]+) max_ms ([\d.]+) "
                           r"store_bytes (\d+) store_at_cap (\d)", text)
        for s in stats[seen:]:
            frames, p50, p99, mx, store, cap = int(s[0]), float(s[1]), float(s[2]), float(s[3]), int(s[4]), int(s[5])
            row = ((time.time() - t0) / 60, rss_mib(pid) if pid else float("nan"), store / 2**20, cap, frames, p50,
                   p99, mx)
            rows.append(row)
            print(f"{row[0]:5.1f} {row[1]:11.1f} {row[2]:9.1f} {row[3]:6d} {row[4]:6d} {row[5]:7.2f} {row[6]:7.2f} "
                  f"{row[7]:7.2f}", flush=True)
        seen = len(stats)
    alive = proc.poll() is None
    if alive:
        os.killpg(proc.pid, signal.SIGTERM) if pid is None else os.kill(pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(3)
    left = subprocess.run(["pgrep", "-f", "-c", "[s]oak-data.txt"], capture_output=True, text=True).stdout.strip()
    end_session(proc)
    print(f"# GUI {'ran the whole time' if alive else 'EXITED EARLY (see ' + log_path + ')'}; after SIGTERM: "
          f"{left or '0'} process(es) of the run left")
    if rows:
        capped = [r for r in rows if r[3]]
        base = capped[0][1] if capped else rows[0][1]
        print(f"# RSS first {rows[0][1]:.1f} MiB, last {rows[-1][1]:.1f} MiB; "
              f"{'since the cap: +%.1f MiB' % (rows[-1][1] - base) if capped else 'the cap was not reached'}; "
              f"worst frame p99 {max(r[6] for r in rows):.2f} ms, max {max(r[7] for r in rows):.2f} ms")


if __name__ == "__main__":
    main()
