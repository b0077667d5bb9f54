#!/usr/bin/env python3
"""Writes the synthetic PyTorch memory snapshots under tests/data/snapshot (plain Python, `pickle` only, no torch).

They follow the format torch.cuda.memory._snapshot() documents (torch/cuda/memory.py): a dict with 'segments'
(each with its blocks and their frames) and 'device_traces' (per device, the allocator's actions in order). The
pattern is one training step on device 0; every figure tests/unit/test_memory_snapshot.cpp checks is worked out by
hand in the comments below. Also writes the hostile set (tests/data/snapshot/hostile) that the reader must refuse.

    python3 tests/tools/make_snapshot_fixtures.py [OUT_DIR]
"""
import json
import os
import pickle
import struct
import sys

MiB = 1 << 20
TORCH = "/usr/lib/python3/site-packages/torch"
S1 = 0x7F0000000000            # segment 1 (8 MiB), reserved before the trace starts
S2 = S1 + 16 * MiB             # segment 2 (20 MiB), reserved in the trace
S3 = S1 + 32 * MiB             # segment 3 (2 MiB), reserved and released in the trace

# Stacks, innermost frame first (as torch records them). Frame dicts are shared between entries, so the pickler
# memoizes them, as torch's own dumps do.
def frame(filename, line, name):
    return {"filename": filename, "line": line, "name": name}

PARAM = [frame(TORCH + "/nn/modules/linear.py", 105, "__init__"), frame("train.py", 12, "build_model"),
         frame("train.py", 80, "main")]
ACT1 = [frame(TORCH + "/nn/functional.py", 2000, "linear"), frame("model.py", 40, "forward"),
        frame(TORCH + "/nn/modules/module.py", 1500, "_call_impl"), frame("train.py", 50, "train_step")]
ACT2 = [frame("model.py", 41, "forward"), frame(TORCH + "/nn/modules/module.py", 1500, "_call_impl"),
        frame("train.py", 50, "train_step")]
ACT3 = [frame("model.py", 42, "forward"), frame("train.py", 50, "train_step")]
GRAD = [frame(TORCH + "/autograd/graph.py", 800, "_engine_run_backward"), frame(TORCH + "/_tensor.py", 500, "backward"),
        frame("train.py", 55, "train_step")]
OPT = [frame(TORCH + "/optim/adam.py", 90, "_init_group"), frame(TORCH + "/optim/adam.py", 200, "step"),
       frame("train.py", 60, "train_step")]
DATA = [frame("data.py", 30, "load_batch")]
COMM = [frame(TORCH + "/distributed/distributed_c10d.py", 3000, "all_reduce")]
OOM = [frame("train.py", 70, "train_step")]


def entry(action, addr, size, frames, t, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames, "time_us": t}
    e.update(extra)
    return e


def training_step_snapshot(with_trace=True):
    """Before the trace: W1 (4 MiB param), tmp (1 MiB) and comm (1 MiB) in segment 1 => start allocated 6 MiB,
    start reserved 8 MiB.  Running allocated (MiB) after each entry:
       0 alloc W2 2 -> 8 | 2 free tmp -> 7 | 3 seg S2 +20 | 4 alloc act1 8 -> 15 | 5 alloc act2 4 -> 19
       6 alloc grad 7 -> 26 (PEAK, reserved 28) | 8 free act2 -> 22 | 10 free act1 -> 14 | 11 exp_avg 2 -> 16
       12 exp_avg_sq 2 -> 18 | 14 free grad -> 11 | 15 seg S3 +2 (reserved 30) | 16 alloc 0.5 -> 11.5
       18 free -> 11 | 19 seg S3 freed (reserved 28) | 20 OOM 64 MiB, device_free 10 MiB | 21 comm free requested
    Dump: reserved 28, allocated 10 (W1 W2 exp_avg exp_avg_sq), active 11 (+ comm awaiting free), largest free 16.
    At the peak: act1 8, grad 7, act2 4, W1 4, W2 2, comm 1 = 26; largest free block 1 MiB (S1 4-5, S2 19-20)."""
    trace = [
        entry("alloc", S1 + 5 * MiB, 2 * MiB, PARAM, 1000),
        entry("free_requested", S1 + 4 * MiB, 1 * MiB, DATA, 1010),
        entry("free_completed", S1 + 4 * MiB, 1 * MiB, DATA, 1020),
        entry("segment_alloc", S2, 20 * MiB, ACT1, 1030),
        entry("alloc", S2, 8 * MiB, ACT1, 1040),
        entry("alloc", S2 + 8 * MiB, 4 * MiB, ACT2, 1050),
        entry("alloc", S2 + 12 * MiB, 7 * MiB, GRAD, 1060),
        entry("free_requested", S2 + 8 * MiB, 4 * MiB, ACT2, 1070),
        entry("free_completed", S2 + 8 * MiB, 4 * MiB, ACT2, 1080),
        entry("free_requested", S2, 8 * MiB, ACT1, 1090),
        entry("free_completed", S2, 8 * MiB, ACT1, 1100),
        entry("alloc", S2, 2 * MiB, OPT, 1110),
        entry("alloc", S2 + 2 * MiB, 2 * MiB, OPT, 1120),
        entry("free_requested", S2 + 12 * MiB, 7 * MiB, GRAD, 1130),
        entry("free_completed", S2 + 12 * MiB, 7 * MiB, GRAD, 1140),
        entry("segment_alloc", S3, 2 * MiB, ACT3, 1150),
        entry("alloc", S3, MiB // 2, ACT3, 1160),
        entry("free_requested", S3, MiB // 2, ACT3, 1170),
        entry("free_completed", S3, MiB // 2, ACT3, 1180),
        entry("segment_free", S3, 2 * MiB, [], 1190),
        {"action": "oom", "size": 64 * MiB, "stream": 0, "frames": OOM, "time_us": 1200, "device_free": 10 * MiB},
        entry("free_requested", S1 + 7 * MiB, 1 * MiB, COMM, 1210),
    ]
    def block(addr, size, state, frames):
        return {"address": addr, "size": size, "requested_size": size, "state": state, "frames": frames}
    segments = [
        {"device": 0, "address": S1, "total_size": 8 * MiB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": DATA,
         "allocated_size": 6 * MiB, "active_size": 7 * MiB, "requested_size": 7 * MiB,
         "blocks": [block(S1, 4 * MiB, "active_allocated", PARAM), block(S1 + 4 * MiB, 1 * MiB, "inactive", []),
                    block(S1 + 5 * MiB, 2 * MiB, "active_allocated", PARAM),
                    block(S1 + 7 * MiB, 1 * MiB, "active_awaiting_free", COMM)]},
        {"device": 0, "address": S2, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": ACT1,
         "allocated_size": 4 * MiB, "active_size": 4 * MiB, "requested_size": 4 * MiB,
         "blocks": [block(S2, 2 * MiB, "active_allocated", OPT), block(S2 + 2 * MiB, 2 * MiB, "active_allocated", OPT),
                    block(S2 + 4 * MiB, 16 * MiB, "inactive", [])]},
    ]
    snap = {"segments": segments,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                                   "expandable_segments": False, "pinned_num_register_threads": 1,
                                   "release_lock_on_cudamalloc": False, "pinned_use_host_register": False,
                                   "roundup_power2_divisions": {}}}
    if with_trace:
        snap["device_traces"] = [trace]
    return snap


class SystemCall:
    """Pickles as a call to os.system (pickling only serializes the reference: nothing runs here)."""
    def __reduce__(self):
        return (os.system, ("echo ultrascope-must-never-run-this",))


def hostile(out):
    os.makedirs(out, exist_ok=True)
    good = pickle.dumps(training_step_snapshot(), protocol=4)
    good_p2 = pickle.dumps(training_step_snapshot(), protocol=2)
    files = {
        # classes and calls: refused by opcode
        "global_reduce_p2.pickle": pickle.dumps({"segments": SystemCall()}, protocol=2),   # GLOBAL + REDUCE
        "stack_global_p4.pickle": pickle.dumps({"segments": SystemCall()}, protocol=4),    # STACK_GLOBAL + REDUCE
        "build_p2.pickle": b"\x80\x02}q\x00}q\x01b.",                                        # BUILD
        # truncated: a valid dump cut in half, and one without its STOP
        "truncated.pickle": good[: len(good) // 2],            # protocol 4: its FRAME says more bytes follow
        "truncated_p2.pickle": good_p2[: len(good_p2) // 2],  # protocol 2: no FRAME, cut inside the data
        "no_stop.pickle": good_p2[:-1],
        # lengths beyond the file
        "huge_string.pickle": b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"abc.",
        "huge_frame.pickle": b"\x80\x04\x95" + struct.pack("<Q", 1 << 60) + b"}.",
        "huge_bytes.pickle": b"\x80\x04B" + struct.pack("<I", 0xFFFFFFFF) + b"x.",
        # nesting: 20,000 open MARKs (over the 10,000 limit), and 5,000 lists nested without marks (read, refused
        # as not a snapshot)
        "deep_marks.pickle": b"\x80\x04" + b"(" * 20000 + b".",
        "deep_lists.pickle": b"\x80\x04" + b"]" * 5000 + b"a" * 4999 + b".",
        "deep.json": b"[" * 20000 + b"]" * 20000,
        # memo cycles: a list that holds itself; a snapshot whose segments list holds the snapshot
        "memo_cycle_list.pickle": b"\x80\x04]\x94h\x00a.",
        "memo_cycle_dict.pickle": b"\x80\x04}\x94\x8c\x08segments\x94]\x94h\x00as.",
        # an int wider than 64 bits, an unknown memo key, a protocol 0 pickle, plain data that is not a snapshot
        "big_int.pickle": b"\x80\x04\x8a\x09" + b"\x01" * 9 + b".",
        "bad_memo.pickle": b"\x80\x04h\x07.",
        "protocol0.pickle": pickle.dumps({"segments": []}, protocol=0),
        "not_a_snapshot.pickle": pickle.dumps({"a": 1}, protocol=4),
        "bad_field.json": json.dumps({"segments": [{"address": "x", "total_size": 1}]}).encode(),
        "empty.pickle": b"",
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "snapshot")
    os.makedirs(out, exist_ok=True)
    snap = training_step_snapshot()
    for protocol, name in [(4, "rank0_memory_snapshot.pickle"), (2, "snapshot_p2.pickle"), (5, "snapshot_p5.pickle")]:
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(snap, f, protocol=protocol)
    with open(os.path.join(out, "snapshot.json"), "w") as f:
        json.dump(snap, f)
    with open(os.path.join(out, "rank1_memory_snapshot.pickle"), "wb") as f:
        pickle.dump(training_step_snapshot(with_trace=False), f, protocol=4)
    hostile(os.path.join(out, "hostile"))


if __name__ == "__main__":
    main()
