#!/usr/bin/env python3
"""The workshop lessons' checks (docs/lessons.md): runs `ultrascope lesson NAME --check` for the lessons whose check
is too slow for ctest (those marked "slow" in assets/lessons; the fast ones are ctest entries labelled `lesson`),
or for the lessons named, and prints one line per lesson: held or not, the claims that held, and the wall time.
Exit code 0 when every lesson's claim held, 1 otherwise. Timing claims (recompute, grad-accum, pipeline,
context-parallel, experts, bottleneck) compare measured times: run them on a machine that is not busy.

    python3 tests/bench/bench_lessons.py [--build build] [--all] [--verbose] [LESSON ...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from bench_common import MPI_ENV, cpu_features

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lessons(all_lessons):
    """(order, name) of the lessons to check: the slow ones, or every one."""
    found = []
    directory = os.path.join(REPO, "assets", "lessons")
    for file in sorted(os.listdir(directory)):
        if not file.endswith(".json"):
            continue
        with open(os.path.join(directory, file)) as f:
            lesson = json.load(f)
        if all_lessons or lesson.get("slow", False):
            found.append((lesson.get("order", 0), file[:-5]))
    return [name for _, name in sorted(found)]


def check(build, name, trace_dir, verbose):
    start = time.monotonic()
    proc = subprocess.run([os.path.join(build, "bin", "ultrascope"), "lesson", name, "--check", "--trace-dir", trace_dir],
                          capture_output=True, text=True, env=MPI_ENV)
    seconds = time.monotonic() - start
    if verbose or proc.returncode != 0:
        print(proc.stdout + proc.stderr)
    summary = re.search(r"(\d+) of (\d+) claim\(s\) hold", proc.stdout)
    return proc.returncode, seconds, f"{summary.group(1)}/{summary.group(2)}" if summary else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--all", action="store_true", help="check every lesson, the fast ones too")
    parser.add_argument("--verbose", action="store_true", help="print each check's output")
    parser.add_argument("names", nargs="*", help="lessons to check (default: the slow ones)")
    args = parser.parse_args()
    names = args.names or lessons(args.all)
    binary = os.path.join(args.build, "bin", "ultrascope")
    if not os.path.exists(binary):
        print(f"bench_lessons.py: {binary} does not exist: build it (ninja -C {args.build} ultrascope ultrascope-train) "
              "or point --build at a build directory", file=sys.stderr)
        return 2
    print(f"Lesson checks on {cpu_features()}, {os.cpu_count()} cores")
    print(f"{'lesson':<18} {'result':<8} {'claims':>6} {'wall':>8}")
    failed = 0
    with tempfile.TemporaryDirectory() as traces:
        for name in names:
            code, seconds, claims = check(args.build, name, traces, args.verbose)
            result = {0: "holds", 1: "FAILS", 2: "INVALID"}.get(code, f"exit {code}")
            print(f"{name:<18} {result:<8} {claims:>6} {seconds:>7.1f}s", flush=True)
            failed += code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
