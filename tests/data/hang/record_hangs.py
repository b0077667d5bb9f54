#!/usr/bin/env python3
"""Records real PyTorch Flight Recorder dumps of hung gloo-on-CPU jobs, one folder per scenario, and what
PyTorch's own analyzer (torchfrtrace) says about them: the inputs of issue 54's hang analysis and its tests.

Needs torch (recorded with 2.15.0; `pip install torch tabulate`, tabulate for torchfrtrace). From the repo root:
    python tests/data/hang/record_hangs.py                  # record every scenario, then run torchfrtrace on each
    python tests/data/hang/record_hangs.py rank_stops        # only the named scenarios
    python tests/data/hang/record_hangs.py --analyze-only    # keep the dumps, run torchfrtrace again
Each job is N worker processes (this file run with --worker), one gloo rank each, on 127.0.0.1. A watchdog
thread in every rank dumps the rank's Flight Recorder buffer when the rank has made no progress for HANG_S
seconds (or when the scenario arms it), waits until every rank has dumped, then ends the process. The parent
kills any worker still alive after JOB_TIMEOUT_S, by pid. Whole run: 5-10 minutes on a busy 2-core machine,
most of it importing torch in 16 processes. torchfrtrace crashes on gloo dumps as written (KeyError on
pg_config), so each scenario's torchfrtrace.txt also holds its run on a repaired copy (pg_config rebuilt from
expected.json's groups). The dumps' stacks point at lines of this file: re-record after editing it.

Scenarios (tests/data/hang/<name>/: comm_lib_trace_rank_<r> per rank as torch writes them, json/ the JSON form
of one rank, expected.json the injected fault and the verdict an analysis should reach, torchfrtrace.txt):
  rank_stops              4 ranks, all_reduce every step; rank 2 stops calling collectives at step 5.
  size_mismatch           4 ranks; at step 3 rank 1 all_reduces an empty tensor (others 8 floats). A non-empty
                          size or dtype mismatch makes gloo abort the receiving process (it leaves no dump).
  p2p_deadlock            4-stage pipeline (send/recv forward, batch_isend_irecv backward, loss all_reduce);
                          at step 4 stage 1 receives from stage 2 before sending to it: 1 and 2 wait on each
                          other. gloo records no send/recv in the Flight Recorder.
  tp_inside_dp            8 ranks, dp 2 x tp 4 (groups tp_0 tp_1 dp_0..dp_3); at step 4 rank 5 stops before its
                          second tp all_reduce: tp_1 hangs, and every dp group waits on its tp_1 member.
  wrapped_16              16 ranks, TORCH_FR_BUFFER_SIZE=20, pair groups pair_0..pair_7 that record at different
                          rates, so buffers wrap at different records; rank 13 stops at step 30.
  healthy_mid_collective  4 ranks, nothing wrong: every rank dumps 0.5 s into the same large all_reduce.
"""

import argparse
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP_PREFIX = "comm_lib_trace_rank_"
HANG_S = 3.0  # no progress for this long: the rank's watchdog dumps
JOB_TIMEOUT_S = 300  # the parent kills the job's workers after this long
COLLECTIVE_TIMEOUT_S = 300  # gloo's own timeout: longer than any job, so gloo never gives up first

# ---------------------------------------------------------------------------------------------------------------
# Worker side: one rank.
# ---------------------------------------------------------------------------------------------------------------


class Rank:
    """What a scenario sees: its rank, torch, its groups, and the watchdog it reports progress to."""

    def __init__(self, rank, world, ctrl, scenario):
        import torch
        import torch.distributed as dist

        self.rank, self.world, self.ctrl, self.scenario = rank, world, ctrl, scenario
        self.torch, self.dist = torch, dist
        self.groups = []  # (name, desc, ranks) of every group this rank belongs to
        self.last_progress = time.monotonic()
        self.armed_at = None  # monotonic time at which to dump regardless of progress
        self.watchdog = None

    def new_group(self, ranks, desc):
        """Every rank calls this for every group (torch requires it); members get their group back."""
        pg = self.dist.new_group(ranks, group_desc=desc)
        if self.rank in ranks:
            self.groups.append((pg.group_name, desc, list(ranks)))
            return pg
        return None

    def world_group(self):
        self.groups.append((self.dist.group.WORLD.group_name, "default_pg", list(range(self.world))))

    def start_watchdog(self):
        print(f"rank {self.rank}: groups made, steps start", flush=True)
        self.last_progress = time.monotonic()
        self.watchdog = threading.Thread(target=self._watch, daemon=True)
        self.watchdog.start()

    def progress(self):
        self.last_progress = time.monotonic()

    def arm(self, delay_s):
        self.armed_at = time.monotonic() + delay_s

    def stop_here(self):
        """The injected fault: this rank stops calling collectives (stuck in its own code)."""
        while True:
            time.sleep(1)

    def _watch(self):
        while True:
            time.sleep(0.05)
            now = time.monotonic()
            if self.armed_at is not None and now >= self.armed_at:
                break
            if now - self.last_progress > self.scenario.get("hang_s", HANG_S):
                break
        self._dump()
        open(os.path.join(self.ctrl, f"dumped_{self.rank}"), "w").close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = [f for f in os.listdir(self.ctrl) if f.startswith("dumped_")]
            if len(done) >= self.world:
                break
            time.sleep(0.05)
        sys.stdout.flush()
        os._exit(0)

    def _dump(self):
        c10d = self.torch._C._distributed_c10d
        # (rank, includeCollectives, includeStackTraces, onlyActive): writes <TORCH_FR_DUMP_TEMP_FILE><rank>.
        c10d._dump_fr_trace_file(self.rank, True, True, False)
        if self.rank == self.scenario["json_rank"]:
            os.makedirs(os.path.join(self.scenario["out"], "json"), exist_ok=True)
            path = os.path.join(self.scenario["out"], "json", f"fr_json_rank{self.rank}.json")
            with open(path, "wb") as f:
                f.write(c10d._dump_fr_trace_json(True, False))  # (includeCollectives, onlyActive)
        with open(os.path.join(self.ctrl, f"groups_{self.rank}.json"), "w") as f:
            json.dump(self.groups, f)
        print(f"rank {self.rank}: dumped", flush=True)


def run_rank_stops(r):
    r.world_group()
    r.start_watchdog()
    for step in range(100):
        if r.rank == 2 and step == 5:
            r.stop_here()
        r.dist.all_reduce(r.torch.ones(8))
        r.progress()


def run_size_mismatch(r):
    r.world_group()
    r.start_watchdog()
    for step in range(100):
        grads = r.torch.ones(0 if (r.rank == 1 and step == 3) else 8)
        r.dist.all_reduce(grads)
        r.progress()


def run_p2p_deadlock(r):
    r.world_group()
    torch, dist, stage, last = r.torch, r.dist, r.rank, r.world - 1
    r.start_watchdog()
    for step in range(100):
        act, grad = torch.zeros(16), torch.zeros(16)
        if stage == 1 and step == 4:
            dist.recv(grad, stage + 1)  # the fault: waits for stage 2's gradient before sending it activations
        if stage > 0:
            dist.recv(act, stage - 1)  # forward: plain send/recv
        if stage < last:
            dist.send(act, stage + 1)
        ops = []  # backward: batch_isend_irecv
        if stage < last:
            ops.append(dist.P2POp(dist.irecv, grad, stage + 1))
        if stage > 0:
            ops.append(dist.P2POp(dist.isend, grad, stage - 1))
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        dist.all_reduce(torch.ones(1))  # the loss, on every stage
        r.progress()


def run_tp_inside_dp(r):
    tp = 4
    dp = r.world // tp
    tp_group = dp_group = None
    for i in range(dp):
        g = r.new_group(list(range(i * tp, (i + 1) * tp)), f"tp_{i}")
        tp_group = g or tp_group
    for j in range(tp):
        g = r.new_group(list(range(j, r.world, tp)), f"dp_{j}")
        dp_group = g or dp_group
    r.start_watchdog()
    for step in range(100):
        r.dist.all_reduce(r.torch.ones(16), group=tp_group)  # attention output
        if r.rank == 5 and step == 4:
            r.stop_here()
        r.dist.all_reduce(r.torch.ones(16), group=tp_group)  # mlp output
        r.dist.all_reduce(r.torch.ones(32), group=dp_group)  # gradients
        r.progress()


def run_wrapped_16(r):
    r.world_group()
    pair, pair_group = None, None
    for i in range(r.world // 2):
        g = r.new_group([2 * i, 2 * i + 1], f"pair_{i}")
        if g is not None:
            pair, pair_group = i, g
    r.start_watchdog()
    for step in range(100):
        if r.rank == 13 and step == 30:
            r.stop_here()
        if pair % 2 == 0 or step % 3 == 0:  # even pairs record twice as many entries a step: buffers wrap apart
            r.dist.all_reduce(r.torch.ones(4), group=pair_group)
        r.dist.all_reduce(r.torch.ones(8))
        r.progress()


def run_healthy_mid_collective(r):
    r.world_group()
    r.start_watchdog()
    for step in range(5):
        r.dist.all_reduce(r.torch.ones(8))
        r.progress()
    params = r.torch.ones(32 * 1024 * 1024)  # made before the barrier: allocating it takes a while
    r.dist.barrier()
    r.arm(0.5)  # every rank dumps 0.5 s into the next all_reduce, which takes seconds
    r.dist.all_reduce(params)
    r.stop_here()  # not reached in a normal run: the watchdog ends the rank first


# ---------------------------------------------------------------------------------------------------------------
# The scenarios: how each is run and the verdict an analysis of its dumps should reach.
# ---------------------------------------------------------------------------------------------------------------

SCENARIOS = {
    "rank_stops": dict(
        run=run_rank_stops, world=4, buffer=64, json_rank=2,
        injected="rank 2 stops calling collectives at step 5; ranks 0, 1, 3 wait in step 5's all_reduce",
        hang=dict(kind="missing", culprit_ranks=[2], group="default_pg",
                  collective=dict(seq_id=6, op="all_reduce", sizes=[[8]], dtypes=["Float"])),
    ),
    "size_mismatch": dict(
        run=run_size_mismatch, world=4, buffer=64, json_rank=1,
        injected="at step 3 rank 1 all_reduces an empty tensor (size [0]) where the others all_reduce 8 floats; "
        "gloo returns at once on rank 1, which goes on into step 4's all_reduce, while 0, 2, 3 wait in step 3's",
        hang=dict(kind="mismatch", culprit_ranks=[1], group="default_pg",
                  collective=dict(seq_id=4, op="all_reduce", sizes=[[8]], dtypes=["Float"]),
                  culprit_sizes=[[0]]),
    ),
    "p2p_deadlock": dict(
        run=run_p2p_deadlock, world=4, buffer=64, json_rank=1,
        injected="4-stage pipeline; at step 4 stage 1 receives from stage 2 before sending it activations, "
        "stage 2 waits to receive from stage 1: a cycle 1 -> 2 -> 1; stage 0 waits in its send to 1, stage 3 "
        "in its recv from 2. gloo records no send/recv, so the dumps hold only the 4 loss all_reduces",
        hang=dict(kind="p2p_deadlock", culprit_ranks=[1, 2], group="default_pg", cycle=[1, 2, 1],
                  collective=None, visible_in_dumps=False),
    ),
    "tp_inside_dp": dict(
        run=run_tp_inside_dp, world=8, buffer=64, json_rank=5,
        injected="dp 2 x tp 4; at step 4 rank 5 stops after its first tp all_reduce; ranks 4, 6, 7 wait in "
        "tp_1's second all_reduce of step 4; ranks 0-3 finish tp_0's and wait in their dp group's all_reduce "
        "for 4-7",
        hang=dict(kind="missing", culprit_ranks=[5], group="tp_1",
                  collective=dict(seq_id=10, op="all_reduce", sizes=[[16]], dtypes=["Float"]),
                  victims=[dict(group=f"dp_{j}", seq_id=5, missing_ranks=[4 + j]) for j in range(4)]),
    ),
    "wrapped_16": dict(
        run=run_wrapped_16, world=16, buffer=20, json_rank=13, hang_s=6.0,  # 16 ranks on 2 cores: slower steps
        injected="16 ranks, buffer 20; even pairs all_reduce in their pair group every step, odd pairs every "
        "third step, then everyone all_reduces in the world group; rank 13 stops at step 30 before pair_6's "
        "all_reduce: rank 12 waits in pair_6, the other 14 in the world all_reduce of step 30",
        hang=dict(kind="missing", culprit_ranks=[13], group="pair_6",
                  collective=dict(seq_id=31, op="all_reduce", sizes=[[4]], dtypes=["Float"]),
                  victims=[dict(group="default_pg", seq_id=31, missing_ranks=[12, 13])]),
    ),
    "healthy_mid_collective": dict(
        run=run_healthy_mid_collective, world=4, buffer=64, json_rank=0,
        injected="nothing: 5 small all_reduces, a barrier, then every rank dumps 0.5 s into a 32 Mi-float "
        "all_reduce that all four have entered",
        hang=dict(kind="inside_collective", culprit_ranks=[], group="default_pg",
                  collective=dict(seq_id=7, op="all_reduce", sizes=[[33554432]], dtypes=["Float"])),
    ),
}


def worker_main(args):
    scenario = SCENARIOS[args.scenario]
    scenario["out"] = args.out
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(scenario["buffer"])
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(args.out, DUMP_PREFIX)
    from datetime import timedelta

    import torch.distributed as dist

    print(f"rank {args.rank}: torch imported", flush=True)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=args.world,
        timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )
    print(f"rank {args.rank}: process group up", flush=True)
    r = Rank(args.rank, args.world, args.ctrl, scenario)
    try:
        scenario["run"](r)
    except Exception as e:  # a collective that fails must not end the rank before its watchdog dumps
        print(f"rank {args.rank}: {e!r}", flush=True)
        r.stop_here()


# ---------------------------------------------------------------------------------------------------------------
# Parent side: launch a job, collect, check, analyse.
# ---------------------------------------------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(name, out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    ctrl = tempfile.mkdtemp(prefix=f"record_hangs_{name}_")
    try:
        run_job(name, out, ctrl)
    finally:
        shutil.rmtree(ctrl, ignore_errors=True)


def run_job(name, out, ctrl):
    scenario = SCENARIOS[name]
    world = scenario["world"]
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs, logs = [], []
    started = time.monotonic()
    for rank in range(world):
        log = open(os.path.join(ctrl, f"log_{rank}.txt"), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--rank", str(rank), "--world",
               str(world), "--port", str(port), "--ctrl", ctrl, "--out", out]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
        logs.append(log)
    deadline = started + JOB_TIMEOUT_S
    try:
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:  # also on Ctrl-C: every worker, by pid, so none outlives its job
        killed = [p.pid for p in procs if p.poll() is None]
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
    elapsed = time.monotonic() - started
    missing = [r for r in range(world) if not os.path.exists(os.path.join(out, f"{DUMP_PREFIX}{r}"))]
    if killed or missing:
        for rank in range(world):
            with open(os.path.join(ctrl, f"log_{rank}.txt")) as f:
                print(f"--- rank {rank} log\n{f.read()[-2000:]}")
        raise SystemExit(f"{name}: killed {killed}, no dump from ranks {missing}")
    groups = {}
    for rank in range(world):
        with open(os.path.join(ctrl, f"groups_{rank}.json")) as f:
            for gname, desc, ranks in json.load(f):
                groups[gname] = dict(name=gname, desc=desc, ranks=ranks)
    write_expected(name, out, sorted(groups.values(), key=lambda g: int(g["name"])))
    print(f"{name}: {world} ranks recorded in {elapsed:.1f} s")


def write_expected(name, out, groups):
    import torch

    scenario = SCENARIOS[name]
    by_desc = {g["desc"]: g for g in groups}
    hang = json.loads(json.dumps(scenario["hang"]))
    hang["process_group"] = by_desc[hang.pop("group")]
    for victim in hang.get("victims", []):
        victim["process_group"] = by_desc[victim.pop("group")]
    expected = dict(scenario=name, torch_version=torch.__version__, world_size=scenario["world"],
                    buffer_size=scenario["buffer"], injected=scenario["injected"], groups=groups, hang=hang)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


def load_dumps(out, world):
    dumps = {}
    for rank in range(world):
        with open(os.path.join(out, f"{DUMP_PREFIX}{rank}"), "rb") as f:
            dumps[rank] = pickle.load(f)
    return dumps


def check(name, out):
    """Checks the dumps hold the injected fault as expected.json says (independently of any analyzer)."""
    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)
    hang = expected["hang"]
    dumps = load_dumps(out, expected["world_size"])
    pg = hang["process_group"]

    def entries_in(rank, seq):
        return [e for e in dumps[rank]["entries"] if tuple(e["process_group"]) == (pg["name"], pg["desc"])
                and not e["is_p2p"] and (seq is None or e["collective_seq_id"] == seq)]

    problems = []
    if hang["collective"] is not None:
        seq = hang["collective"]["seq_id"]
        for rank in pg["ranks"]:
            found = entries_in(rank, seq)
            if rank in hang["culprit_ranks"] and hang["kind"] == "missing":
                last = max((e["collective_seq_id"] for e in entries_in(rank, None)), default=0)
                if found or last != seq - 1:
                    problems.append(f"culprit {rank} should stop at seq {seq - 1}, has {last}")
            elif not found:
                problems.append(f"rank {rank} has no seq {seq} in {pg['desc']}")
            elif rank in hang["culprit_ranks"]:
                if found[0]["input_sizes"] != hang["culprit_sizes"]:
                    problems.append(f"culprit {rank} sizes {found[0]['input_sizes']}")
            elif found[0]["retired"] or found[0]["input_sizes"] != hang["collective"]["sizes"]:
                problems.append(f"rank {rank} seq {seq}: {found[0]['input_sizes']} retired={found[0]['retired']}")
    else:
        for rank in pg["ranks"]:
            if any(not e["retired"] for e in entries_in(rank, None)):
                problems.append(f"rank {rank} has an unretired collective")
    print(f"{name}: check {'ok' if not problems else 'FAILED: ' + '; '.join(problems)}")
    return not problems


def repair(src, dst, groups):
    """A copy torchfrtrace can read: gloo writes pg_config as {'': last group made}; give each rank its groups."""
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for f in sorted(os.listdir(src)):
        if not f.startswith(DUMP_PREFIX):
            continue
        rank = int(f[len(DUMP_PREFIX):])
        with open(os.path.join(src, f), "rb") as fin:
            dump = pickle.load(fin)
        dump["pg_config"] = {g["name"]: dict(name=g["name"], desc=g["desc"], ranks=str(g["ranks"]))
                             for g in groups if rank in g["ranks"]}
        with open(os.path.join(dst, f), "wb") as fout:
            pickle.dump(dump, fout, protocol=2)


def run_torchfrtrace(folder, shown):
    cmd = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", folder]
    started = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
    took = time.monotonic() - started
    order = [f for f in os.listdir(folder) if f.startswith(DUMP_PREFIX)]
    text = (f"$ python -m torch.distributed.flight_recorder.fr_trace {shown}\n"
            f"# exit code {p.returncode}, {took:.1f} s; its reference rank is the first file os.walk lists: {order}\n"
            f"# --- stdout\n{p.stdout}# --- stderr\n{p.stderr}")
    # the recording machine's paths say nothing about the dumps: the interpreter's prefix (a traceback's frames)
    # and the repository's root (the dumps' stack frames name the recorder's own lines)
    root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    return p.returncode, text.replace(sys.prefix, "<python prefix>").replace(root, "<repo>")


def analyze(name, out):
    with open(os.path.join(out, "expected.json")) as f:
        groups = json.load(f)["groups"]
    rel = os.path.relpath(out, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
    rc, text = run_torchfrtrace(out, rel)
    parts = [text]
    if rc != 0:
        fixed = os.path.join(tempfile.gettempdir(), "record_hangs_repaired", name)
        repair(out, fixed, groups)
        rc2, text2 = run_torchfrtrace(fixed, f"REPAIRED_COPY  # {rel}, pg_config from expected.json's groups")
        parts.append(text2)
        shutil.rmtree(os.path.dirname(fixed))
    with open(os.path.join(out, "torchfrtrace.txt"), "w") as f:
        f.write("\n".join(parts))
    print(f"{name}: torchfrtrace exit {rc}" + ("" if rc == 0 else f", on the repaired copy {rc2}"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", help=f"some of {', '.join(SCENARIOS)} (default: all)")
    ap.add_argument("--analyze-only", action="store_true", help="keep the dumps, run the check and torchfrtrace")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ctrl", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.scenario = args.worker
        worker_main(args)
        return
    names = args.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario {unknown}; choose from {list(SCENARIOS)}")
    ok = True
    for name in names:
        out = os.path.join(HERE, name)
        if not args.analyze_only:
            record(name, out)
        ok = check(name, out) and ok
        analyze(name, out)
    if not ok:
        raise SystemExit("some dumps do not hold the injected fault as expected.json says")


if __name__ == "__main__":
    main()
