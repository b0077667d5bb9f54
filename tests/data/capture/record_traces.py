#!/usr/bin/env python3
"""Records what PyTorch's profiler (Kineto) writes when a running job is asked for a trace through the daemon
protocol (dynolog's), with no change to the job: the inputs of issue 55's capture (profiler/capture/) and of the
agent's replay test. Recorded only for tests; Ultrascope's own endpoint is C++ (ultrascope agent / capture).

Run from the repo root with a Python that has torch (recorded with torch 2.15.0, CPU, gloo):
    $ULTRASCOPE_TORCH_PYTHON tests/data/capture/record_traces.py [--steps 3] [--roundup 300]
It starts a 2-rank torchrun job (this file with --worker: a small MLP under DDP on gloo, SGD, ~10 ms a step) with
KINETO_USE_DAEMON=1 and KINETO_CONFIG naming a file that holds ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1, and plays a
minimal dynolog: it binds the datagram socket "\\0dynolog\\0" (abstract, the trailing NUL counted; with
--socket-dir, DIR/dynolog and KINETO_IPC_SOCKET_DIR=DIR for the job), answers every poll, and arms only pollers
that are no other poller's ancestor (the torchrun agent polls too) with an iteration-based on-demand config. It
re-arms a rank whose file has not appeared after --retry-s (a request that lands before the rank's first optimizer
step is dropped by Kineto). When every <file>_<pid>.json exists it stops the job (the whole process group, on every
exit path) and writes into tests/data/capture/ddp_mlp/:
  rank files as Kineto wrote them, gzip-compressed (trace_<pid>.json.gz), manifest.json (pid -> rank, world size,
  local rank, host; the config sent), datagrams.bin + datagrams.txt (every datagram received and sent, FORMAT.md).
"""

import argparse
import atexit
import gzip
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = struct.Struct("<Q32s")  # size_t size; char type[32]: dynolog's ipcfabric Message metadata (40 bytes)
REQUEST = struct.Struct("<iiq")  # int32 type; int32 n; int64 jobid; then int32 pids[n]
STEP_SLEEP_S = 0.008  # stands for data loading: keeps a step near 10 ms on a busy machine
READY_STEPS = 20  # a worker writes its ready file after this many optimizer steps

# ---------------------------------------------------------------------------------------------------------------
# Worker side: one rank of the job, run by torchrun. Nothing in it knows about profiling.
# ---------------------------------------------------------------------------------------------------------------


def die_with_parent():
    """PR_SET_PDEATHSIG: the process is killed when its parent dies, even by SIGKILL (Linux)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def worker(run_dir, max_s):
    die_with_parent()  # a worker never outlives torchrun's agent
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    start, step = time.monotonic(), 0
    stop = os.path.join(run_dir, "stop")
    while time.monotonic() - start < max_s:
        time.sleep(STEP_SLEEP_S)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        step += 1
        if step == READY_STEPS:
            open(os.path.join(run_dir, f"ready_{rank}"), "w").close()
        # Every rank decides to stop on the same step: one all_reduce of the flag every 50 steps.
        if step % 50 == 0:
            flag = torch.tensor([1.0 if os.path.exists(stop) else 0.0])
            dist.all_reduce(flag)
            if flag.item() > 0:
                break
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------------------------
# Recorder side: the job, the socket, the datagram log.
# ---------------------------------------------------------------------------------------------------------------


class DatagramLog:
    """Every datagram received and sent, in order, for the agent's replay test (FORMAT.md)."""

    def __init__(self):
        self.records = []  # (direction, t, address bytes, datagram bytes)
        self.t0 = time.monotonic()

    def add(self, direction, addr, data):
        self.records.append((direction, time.monotonic() - self.t0, addr, data))

    def write(self, out_dir):
        with open(os.path.join(out_dir, "datagrams.bin"), "wb") as f:
            f.write(b"USDGRAM1")
            f.write(struct.pack("<I", len(self.records)))
            for direction, t, addr, data in self.records:
                f.write(struct.pack("<BxxxdII", direction, t, len(addr), len(data)))
                f.write(addr)
                f.write(data)
        with open(os.path.join(out_dir, "datagrams.txt"), "w") as f:
            f.write("# direction t_s sender-or-receiver size type body (FORMAT.md)\n")
            for direction, t, addr, data in self.records:
                size, kind = HEADER.unpack_from(data)
                kind = kind.rstrip(b"\0").decode()
                body = data[HEADER.size :]
                if direction == 0:
                    typ, n, jobid = REQUEST.unpack_from(body)
                    pids = struct.unpack_from(f"<{n}i", body, REQUEST.size)
                    what = f"type={typ} n={n} jobid={jobid} pids={list(pids)}"
                else:
                    what = json.dumps(body.decode()) if body else "(empty: nothing asked)"
                f.write(f"{'recv' if direction == 0 else 'send'} {t:.3f} {addr!r} size={size} {kind} {what}\n")


def bind_endpoint(socket_dir):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if socket_dir:
        path = os.path.join(socket_dir, "dynolog")
        if os.path.exists(path):
            os.unlink(path)
        sock.bind(path)
    else:
        try:
            sock.bind(b"\0dynolog\0")  # the trailing NUL is part of the name Kineto sends to
        except OSError as e:
            sys.exit(f"the abstract socket name dynolog is taken ({e}): stop the other daemon, or use --socket-dir")
    sock.settimeout(0.2)
    return sock


def reply(sock, log, addr, text):
    payload = text.encode()
    data = HEADER.pack(len(payload), b"req") + payload
    sock.sendto(data, addr)
    log.add(1, addr if isinstance(addr, bytes) else addr.encode(), data)


def proc_environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def kineto_config(run_dir, steps, roundup):
    return "\n".join(
        [
            f"ACTIVITIES_LOG_FILE={run_dir}/trace.json",
            "PROFILE_START_ITERATION=0",
            f"PROFILE_START_ITERATION_ROUNDUP={roundup}",
            f"ACTIVITIES_ITERATIONS={steps}",
            "ACTIVITIES_DURATION_MSECS=0",
        ]
    )


def trace_complete(path):
    """Kineto appends the events to the file as it goes: it is finished once it ends with "traceName" and '}'."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 1024))
            tail = f.read().rstrip()
    except OSError:
        return False
    return tail.endswith(b"}") and b'"traceName"' in tail


def serve(sock, log, run_dir, args, job):
    """Answers polls until every worker's file exists; returns {pid: environ subset} of the armed workers."""
    pollers = {}  # pid -> ancestors (from its latest request)
    armed_at = {}  # pid -> monotonic time of the latest arming
    config = kineto_config(run_dir, args.steps, args.roundup)
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        if job.poll() is not None:
            sys.exit(f"the job ended (exit {job.returncode}) before every rank wrote its trace")
        try:
            data, addr = sock.recvfrom(65536)
        except socket.timeout:
            data = None
        if data:
            log.add(0, addr if isinstance(addr, bytes) else addr.encode(), data)
            typ, n, jobid = REQUEST.unpack_from(data, HEADER.size)
            pids = struct.unpack_from(f"<{n}i", data, HEADER.size + REQUEST.size)
            pollers[pids[0]] = set(pids[1:])
            leaf = not any(pids[0] in anc for p, anc in pollers.items() if p != pids[0])
            ready = all(os.path.exists(os.path.join(run_dir, f"ready_{r}")) for r in range(2))
            due = pids[0] not in armed_at or time.monotonic() - armed_at[pids[0]] > args.retry_s
            done = os.path.exists(os.path.join(run_dir, f"trace_{pids[0]}.json"))
            if leaf and ready and due and not done and len(pollers) >= 3:
                armed_at[pids[0]] = time.monotonic()
                print(f"arming pid {pids[0]} (ancestors {sorted(pollers[pids[0]])})", flush=True)
                reply(sock, log, addr, config)
            else:
                reply(sock, log, addr, "")
        workers = [p for p in pollers if not any(p in anc for anc in pollers.values())]
        if len(workers) == 2 and all(trace_complete(os.path.join(run_dir, f"trace_{p}.json")) for p in workers):
            return workers, config
    sys.exit(f"timed out after {args.timeout_s} s waiting for both traces")


def drain(sock, log, job, seconds):
    """Keeps answering polls (nothing asked) until the job has ended: a daemon that stops reading makes Kineto's
    sends fail ("IPC sync_send fail") while the job winds down."""
    deadline = time.monotonic() + seconds
    while job.poll() is None and time.monotonic() < deadline:
        try:
            data, addr = sock.recvfrom(65536)
        except socket.timeout:
            continue
        log.add(0, addr if isinstance(addr, bytes) else addr.encode(), data)
        reply(sock, log, addr, "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run-dir", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=3, help="optimizer steps to capture (ACTIVITIES_ITERATIONS)")
    p.add_argument("--roundup", type=int, default=300, help="PROFILE_START_ITERATION_ROUNDUP")
    p.add_argument("--retry-s", type=float, default=10.0, help="re-arm a rank whose file has not appeared")
    p.add_argument("--timeout-s", type=float, default=180.0)
    p.add_argument("--socket-dir", help="use DIR/dynolog (KINETO_IPC_SOCKET_DIR) instead of the abstract name")
    p.add_argument("--out", default=os.path.join(HERE, "ddp_mlp"))
    args = p.parse_args()
    if args.worker:
        return worker(args.run_dir, max_s=240)

    run_dir = tempfile.mkdtemp(prefix="us_capture_", dir="/tmp")  # Kineto writes only under /tmp
    with open(os.path.join(run_dir, "kineto.conf"), "w") as f:
        f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
    sock = bind_endpoint(args.socket_dir)
    env = dict(os.environ, KINETO_USE_DAEMON="1", KINETO_CONFIG=os.path.join(run_dir, "kineto.conf"))
    if args.socket_dir:
        env["KINETO_IPC_SOCKET_DIR"] = args.socket_dir
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [torchrun, "--standalone", "--nproc-per-node", "2", os.path.abspath(__file__), "--worker"]
    job = subprocess.Popen(
        cmd + ["--run-dir", run_dir], env=env, start_new_session=True, preexec_fn=die_with_parent
    )

    def stop_job(*_):
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()

    atexit.register(stop_job)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    signal.signal(signal.SIGINT, lambda *_: sys.exit("interrupted"))
    log = DatagramLog()
    try:
        workers, config = serve(sock, log, run_dir, args, job)
        envs = {pid: proc_environ(pid) for pid in workers}
        open(os.path.join(run_dir, "stop"), "w").close()
        drain(sock, log, job, 60)
    finally:
        stop_job()
        sock.close()
        if args.socket_dir:
            os.unlink(os.path.join(args.socket_dir, "dynolog"))
    write_output(args.out, run_dir, workers, envs, config, log, args)
    shutil.rmtree(run_dir)


def write_output(out, run_dir, workers, envs, config, log, args):
    os.makedirs(out, exist_ok=True)
    ranks = []
    for pid in sorted(workers, key=lambda p: int(envs[p]["RANK"])):
        name = f"trace_{pid}.json"
        with open(os.path.join(run_dir, name), "rb") as src, gzip.open(os.path.join(out, name + ".gz"), "wb") as dst:
            dst.write(src.read())
        e = envs[pid]
        ranks.append(
            {
                "pid": pid,
                "rank": int(e["RANK"]),
                "world_size": int(e["WORLD_SIZE"]),
                "local_rank": int(e["LOCAL_RANK"]),
                "host": socket.gethostname(),
                "raw_trace": name + ".gz",
            }
        )
    import torch

    manifest = {
        "torch": torch.__version__,
        "backend": "gloo",
        "steps_asked": args.steps,
        "config": config.replace(run_dir, "/tmp/<run>"),
        "ranks": ranks,
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    log.write(out)
    print(f"wrote {out}: {[r['raw_trace'] for r in ranks]}")


if __name__ == "__main__":
    main()
