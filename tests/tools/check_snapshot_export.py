#!/usr/bin/env python3
"""Checks a memory snapshot written by `ultrascope export TRACE --memory-snapshot OUT.pickle`.

Loads it with the standard `pickle` module (the file holds plain data only: a refusing unpickler proves it), checks
the fields torch.cuda.memory._snapshot() documents, replays the trace as pytorch.org/memory_viz's Active Memory
Timeline does, and, if torch is importable, runs torch.cuda._memory_viz's own readers over it (segsum, trace,
trace_plot). Exit 0: it opens; 1: it does not (the reason printed).

    python3 tests/tools/check_snapshot_export.py OUT.pickle [...]
"""
import io
import pickle
import sys


class PlainDataOnly(pickle.Unpickler):
    def find_class(self, module, name):  # any class or function in the file is an error
        raise pickle.UnpicklingError(f"the snapshot names {module}.{name}: not plain data")


def check(path):
    with open(path, "rb") as f:
        data = f.read()
    snap = PlainDataOnly(io.BytesIO(data)).load()
    assert isinstance(snap, dict), "not a dict"
    assert isinstance(snap.get("segments"), list), "no segments list"
    traces = snap.get("device_traces", [])
    assert isinstance(traces, list), "device_traces is not a list"
    for seg in snap["segments"]:
        for key in ("address", "total_size", "stream", "segment_type", "allocated_size", "active_size", "blocks"):
            assert key in seg, f"a segment without {key}"
        assert sum(b["size"] for b in seg["blocks"]) <= seg["total_size"], "blocks larger than their segment"
        for b in seg["blocks"]:
            assert b["state"] in ("active_allocated", "active_awaiting_free", "inactive"), b["state"]
            assert all({"filename", "line", "name"} <= set(fr) for fr in b["frames"]), "a frame without its fields"
    live, allocated, peak = {}, 0, 0
    for entries in traces:
        for e in entries:
            assert {"action", "addr", "size", "stream", "frames"} <= set(e), f"an entry without its fields: {e}"
            if e["action"] == "alloc":
                assert e["addr"] not in live, f"address {e['addr']:#x} allocated twice"
                live[e["addr"]] = e["size"]
                allocated += e["size"]
                peak = max(peak, allocated)
            elif e["action"] == "free_completed":
                assert live.pop(e["addr"], None) == e["size"], f"free of {e['addr']:#x} matches no allocation"
                allocated -= e["size"]
    at_dump = sum(b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    assert at_dump == allocated, f"the dump holds {at_dump} B but the trace leaves {allocated} B allocated"
    print(f"{path}: {sum(len(t) for t in traces)} trace entries, peak allocated {peak} B, {at_dump} B at dump: ok")
    try:
        import torch.cuda._memory_viz as viz
    except ImportError:
        print(f"{path}: torch is not importable here: torch.cuda._memory_viz not run")
        return
    viz.segsum(snap)
    viz.trace(snap)
    html = viz.trace_plot(snap)
    assert "<html" in html.lower() or len(html) > 0
    print(f"{path}: torch.cuda._memory_viz segsum, trace and trace_plot ran: ok")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    ok = True
    for path in sys.argv[1:]:
        try:
            check(path)
        except Exception as e:  # report every file, then fail
            print(f"{path}: FAILED: {e}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
