#!/usr/bin/env python3
"""Lists every distinct GPU kernel, memcpy and memset name in the committed Kineto traces, one a line, sorted.

tests/data/kineto/kernel_names.tsv must hold each of them (tests/unit/test_kernel_names.cpp checks its rows);
--check says which are missing from it, so a newly committed trace's kernels get a row with their expected short
name and class. The CUPTI traces' (.ustrace) kernel names are not read here: take them from
`ultrascope report FILE --json` (ranks[i].ops.rows[].name).

    tests/tools/list_kernel_names.py [ROOT] [--check TABLE]
"""
import argparse
import gzip
import json
import pathlib
import sys

# Files under tests/data/kineto that are not traces.
NOT_TRACES = {"meta.json", "scenarios.json", "hta_reference.json"}
# The event categories whose names are the GPU's work, as the Kineto reader takes them (profiler/import/
# kineto_parse.cpp): "kernel", "gpu_memcpy", "gpu_memset", and older Kineto's "Kernel", "Memcpy", "Memset".
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def trace_files(root):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in NOT_TRACES and path.name.endswith((".json", ".json.gz")):
            yield path


def kernel_names(path):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        try:
            trace = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return set()
    if not isinstance(trace, dict):  # a memory timeline ([times, sizes]), not a trace
        return set()
    return {
        e["name"]
        for e in trace.get("traceEvents", [])
        if isinstance(e, dict) and e.get("cat") in DEVICE_CATS and isinstance(e.get("name"), str)
    }


def main():
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", default=here.parent / "data" / "kineto", type=pathlib.Path)
    parser.add_argument("--check", type=pathlib.Path, help="the table (kernel_names.tsv) whose first column must "
                        "hold every name; prints the missing ones and fails when there are any")
    args = parser.parse_args()
    names = set()
    for path in trace_files(args.root):
        names |= kernel_names(path)
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            table = {line.split("\t", 1)[0] for line in f if line.strip() and not line.startswith("#")}
        missing = sorted(names - table)
        for name in missing:
            print(name)
        print(f"{len(names)} names in the traces, {len(missing)} missing from {args.check}", file=sys.stderr)
        return 1 if missing else 0
    for name in sorted(names):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
