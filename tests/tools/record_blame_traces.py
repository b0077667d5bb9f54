#!/usr/bin/env python3
"""Records real torch.profiler (Kineto) traces WITH A KNOWN CULPRIT for the "who holds the run back" (straggler /
blame) analysis: the GPT of record_pytorch_traces.py trained on gloo CPU ranks (127.0.0.1), where one rank does more
compute than the others (its model repeats every forward computation FACTOR times, keeping one result) or one
pipeline stage holds twice the blocks, plus a control run with no culprit. Each scenario's meta.json carries the
ground truth as "culprit". Run through tests/tools/record_blame_traces.sh, which writes tests/data/kineto/blame/.

The slowness is compute, never sleep: the repeated forward runs the same aten ops on the same shapes (with grad, the
extra results dropped at once), and under DDP/FSDP2 it stays inside the module each collective is issued for, so
every rank issues the same collectives in the same order."""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_pytorch_traces as rp  # noqa: E402  (the model, profiler settings and file naming of the other scenarios)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

# rp's GPT (vocab 256, seq 64, hidden 64, 4 heads); a larger batch than rp's 8 so that each op's compute, not the
# profiler's per-op cost or the scheduler's noise on a small shared machine, sets the step time (the op count, and
# so the trace size, does not grow with the batch).
BATCH = 128
NAMING = "megatron"  # rank-R.json.gz via export_chrome_trace
QUIET_WAIT_S = 1800  # how long to wait for the host to quiet down before each run
OTHER_LOAD_LIMIT = 0.05  # record again when other processes took more than this share of the cores during a run
TRIES = 6  # runs per scenario at most (see record)


def batch_for(step, data_rank):
    g = torch.Generator().manual_seed(1000 * step + data_rank)
    tokens = torch.randint(0, rp.VOCAB, (BATCH, rp.SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


class RepeatBlock(rp.Block):
    """rp.Block whose forward body runs `repeat` times on the same input; the last result is kept."""

    def __init__(self, repeat=1):
        super().__init__()
        self.repeat = repeat

    def forward(self, x):
        for _ in range(self.repeat):
            y = super().forward(x)
        return y


class BlameGpt(rp.Gpt):
    """rp.Gpt (same modules and names) whose every forward computation (embeddings, each block's body, final norm
    and head) runs `repeat` times, one result kept. Backward and the optimizer step are unchanged."""

    def __init__(self, layers, first=True, last=True, repeat=1):
        nn.Module.__init__(self)
        self.first, self.last, self.repeat = first, last, repeat
        if first:
            self.tok_emb, self.pos_emb = nn.Embedding(rp.VOCAB, rp.HIDDEN), nn.Embedding(rp.SEQ, rp.HIDDEN)
        self.blocks = nn.ModuleList(RepeatBlock(repeat) for _ in range(layers))
        if last:
            self.ln_f, self.head = nn.LayerNorm(rp.HIDDEN), nn.Linear(rp.HIDDEN, rp.VOCAB)

    def forward(self, x):
        if self.first:
            for _ in range(self.repeat):
                h = self.tok_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
            x = h
        for block in self.blocks:  # each block repeats its own body: FSDP2 gathers a block's weights once a call
            x = block(x)
        if not self.last:
            return x
        for _ in range(self.repeat):
            out = self.head(self.ln_f(x))
        return out


def train_step(model, opt, rank):
    def step(i):
        x, y = batch_for(i, rank)
        rp.loss_of(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def setup_ddp(rank, world, sc):
    from torch.nn.parallel import DistributedDataParallel
    repeat = sc["factor"] if rank == sc["slow_rank"] else 1
    model = DistributedDataParallel(BlameGpt(sc["layers"], repeat=repeat))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return train_step(model, opt, rank), {
        "layout": {"dp": world}, "parallelism": "DistributedDataParallel over the default process group",
        "layers": sc["layers"]}


def setup_fsdp2(rank, world, sc):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    repeat = sc["factor"] if rank == sc["slow_rank"] else 1
    model = BlameGpt(sc["layers"], repeat=repeat)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return train_step(model, opt, rank), {
        "layout": {"dp": world}, "layers": sc["layers"],
        "parallelism": "FSDP2 fully_shard per block and on the root, 1-D DeviceMesh 'dp'"}


def setup_pipeline(rank, world, sc):
    from torch.distributed import pipelining
    layers_of_stage = sc["layers_of_stage"]
    num_stages = len(layers_of_stage)
    assert num_stages == world
    stage = rank  # one stage per rank
    torch.manual_seed(stage)
    mod = BlameGpt(layers_of_stage[stage], first=(stage == 0), last=(stage == num_stages - 1))
    pstage = pipelining.PipelineStage(mod, stage, num_stages, torch.device("cpu"))
    sched = getattr(pipelining, sc["schedule"])(pstage, n_microbatches=sc["micro_batches"], loss_fn=rp.loss_of)
    opt = torch.optim.AdamW(mod.parameters(), lr=1e-3)

    def step(i):
        x, y = batch_for(i, 0)
        args = (x,) if stage == 0 else ()
        kwargs = {"target": y, "losses": []} if stage == num_stages - 1 else {}
        sched.step(*args, **kwargs)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"layout": {"pp": world}, "schedule": sc["schedule"], "micro_batches": sc["micro_batches"],
                  "micro_batch_size": BATCH // sc["micro_batches"], "stages": num_stages, "stages_per_rank": 1,
                  "stages_of_rank": {str(r): [r] for r in range(world)},
                  "layers_of_stage": {str(s): n for s, n in enumerate(layers_of_stage)},
                  "layers": sum(layers_of_stage), "placement": "stage s on rank s",
                  "stage_extras": "stage 0 also holds tok_emb and pos_emb; the last stage also ln_f, head and the loss",
                  "parallelism": f"torch.distributed.pipelining {sc['schedule']}"}


def slow_rank_culprit(rank, factor):
    return {"kind": "slow_rank", "rank": rank, "stage": None, "factor": float(factor),
            "how": f"forward repeated {factor}x inside the model: on rank {rank} every forward computation "
                   "(embeddings, each block's body, final norm and head) runs "
                   f"{factor} times on the same input, one result kept; backward, optimizer and collectives "
                   "unchanged (the same collectives in the same order on every rank)",
            "applies_to": "forward"}


NO_CULPRIT = {"kind": "none", "rank": None, "stage": None, "factor": 1.0,
              "how": "every rank runs the same model on the same amount of data; nothing is slowed on purpose"}

# name -> settings. "slow_rank" / "factor": which rank repeats its forward and how many times.
SCENARIOS = {
    "ddp_slow_rank": dict(setup=setup_ddp, world=4, layers=2, slow_rank=2, factor=3,
                          culprit=slow_rank_culprit(2, 3)),
    "fsdp2_slow_rank": dict(setup=setup_fsdp2, world=4, layers=2, slow_rank=1, factor=3,
                            culprit=slow_rank_culprit(1, 3)),
    "pipeline_heavy_stage": dict(
        setup=setup_pipeline, world=4, layers_of_stage=[1, 1, 2, 1], schedule="Schedule1F1B", micro_batches=8,
        culprit={"kind": "heavy_stage", "rank": 2, "stage": 2, "factor": 2.0,
                 "how": "stage 2 (on rank 2) holds 2 transformer blocks, every other stage 1 (stage 0 also the "
                        "embeddings, stage 3 also ln_f, the head and the loss)",
                 "applies_to": "forward and backward of every micro-batch"}),
    "ddp_no_culprit": dict(setup=setup_ddp, world=4, layers=2, slow_rank=None, factor=1, culprit=NO_CULPRIT),
    "ddp_slow_rank_8": dict(setup=setup_ddp, world=8, layers=2, slow_rank=5, factor=3,
                            culprit=slow_rank_culprit(5, 3)),
}


# ---- the host: the ranks share its few cores, so a recording is only fair on an otherwise idle machine ----

def cpu_jiffies():
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v) - idle, sum(v)


def own_cpu_s():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def wait_for_quiet(max_wait_s, busy_limit=0.1):
    """Waits (up to max_wait_s) until other processes use under busy_limit of the host's CPUs over 3 s."""
    start = time.time()
    while True:
        b0, t0 = cpu_jiffies()
        time.sleep(3)
        b1, t1 = cpu_jiffies()
        busy = (b1 - b0) / max(1, t1 - t0)
        if busy < busy_limit or time.time() - start > max_wait_s:
            return busy
        print(f"   host busy {busy:.0%}, waiting for it to quiet down", flush=True)
        time.sleep(10)


def worker(rank, world, name, out_dir, port, result_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    # Rank r on core r % cores, so the ranks share the cores evenly and the same way each time (left to itself the
    # scheduler can leave one rank a core of its own and three on the other). Before gloo's threads start: they
    # inherit it.
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sc = SCENARIOS[name]
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        step, meta = sc["setup"](rank, world, sc)
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(**rp.PROFILER_SCHEDULE),
                     on_trace_ready=rp.trace_handler(NAMING, out_dir, rank), record_shapes=True,
                     profile_memory=True) as prof:
            for i in range(rp.STEPS):
                step(i)
                prof.step()
        dist.barrier()
        dist.destroy_process_group()
        with open(os.path.join(result_dir, f"meta-{rank}.json"), "w") as f:
            json.dump(meta, f)
    except Exception:
        with open(os.path.join(result_dir, f"error-{rank}.txt"), "w") as f:
            f.write(traceback.format_exc())
        raise


def record_once(name, tmp, result_dir):
    """One run of the scenario; returns (error or None, host figures)."""
    world = SCENARIOS[name]["world"]
    quiet_before = wait_for_quiet(QUIET_WAIT_S)
    b0, t0 = cpu_jiffies()
    own0, wall0 = own_cpu_s(), time.time()
    error = None
    try:
        mp.spawn(worker, args=(world, name, tmp, rp.free_port(), result_dir), nprocs=world, join=True)
    except Exception as e:  # noqa: BLE001
        errors = [open(os.path.join(result_dir, f)).read() for f in sorted(os.listdir(result_dir))
                  if f.startswith("error-")]
        error = errors[0] if errors else str(e)
    b1, t1 = cpu_jiffies()
    hz = os.sysconf("SC_CLK_TCK")
    wall = time.time() - wall0
    other = max(0.0, (b1 - b0) / hz - (own_cpu_s() - own0))
    host = {"cores": len(os.sched_getaffinity(0)), "wall_s": round(wall, 1),
            "busy_before_start": round(quiet_before, 3), "other_processes_cpu_s": round(other, 1),
            "other_processes_share": round(other / (wall * os.cpu_count()), 3)}
    return error, host


def build_meta(name, result_dir, tmp, host):
    sc = SCENARIOS[name]
    meta = json.load(open(os.path.join(result_dir, "meta-0.json")))
    traces = sorted(f for f in os.listdir(tmp) if f.endswith(".json.gz"))
    layers = meta.pop("layers")
    return {"scenario": name, "ranks": sc["world"], **meta, "layers": layers,
            "file_naming": rp.NAMING_TEXT[NAMING],
            "culprit": sc["culprit"],
            "profiler": {"activities": ["CPU"], "schedule": rp.PROFILER_SCHEDULE, "record_shapes": True,
                         "profile_memory": True, "with_stack": False},
            "steps_run": rp.STEPS,
            "steps_recorded": list(range(rp.PROFILER_SCHEDULE["wait"] + rp.PROFILER_SCHEDULE["warmup"], rp.STEPS)),
            "steps_recorded_note": "Kineto's ProfilerStep#N numbers (0-based) of the active steps",
            "model": {"vocab": rp.VOCAB, "seq": rp.SEQ, "hidden": rp.HIDDEN, "heads": rp.HEADS, "layers": layers,
                      "batch_per_step": BATCH, "optimizer": "AdamW lr 1e-3", "dtype": "float32"},
            "threads_per_rank": 1,
            "cpu_affinity": f"rank r pinned to core r % {host['cores']} (os.sched_setaffinity)",
            "host_during_recording": host, "backend": "gloo", "device": "cpu",
            "torch": torch.__version__, "trace_files": traces}


def write_meta(folder, meta):
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def culprit_visible(folder):
    """check_blame_traces.py's verdict on a recorded folder (its meta.json written), its table silenced."""
    import contextlib
    import io
    import check_blame_traces
    with contextlib.redirect_stdout(io.StringIO()):
        return check_blame_traces.check(folder)["ok"]


def record(name, out_root):
    """Records the scenario until a run is clean: other processes took at most OTHER_LOAD_LIMIT of the cores, and
    check_blame_traces.py sees the culprit (or, with none, no rank standing out). Up to TRIES runs; the last is kept
    whatever it shows, and meta.json's host_during_recording says how many runs were turned down and why."""
    final = os.path.join(out_root, name)
    rejected = {"host_load": 0, "culprit_not_visible": 0}
    for attempt in range(1, TRIES + 1):
        tmp = tempfile.mkdtemp(prefix=f"kineto-blame-{name}-")
        result_dir = tempfile.mkdtemp(prefix=f"kineto-blame-{name}-result-")
        error, host = record_once(name, tmp, result_dir)
        print(f"   attempt {attempt}: {json.dumps(host)}", flush=True)
        if error is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(result_dir, ignore_errors=True)
            return {"scenario": name, "ok": False, "error": error.strip().splitlines()[-1], "traceback": error}
        host.update(attempts=attempt, attempts_turned_down=dict(rejected))
        meta = build_meta(name, result_dir, tmp, host)
        write_meta(tmp, meta)
        visible = culprit_visible(tmp)
        if host["other_processes_share"] > OTHER_LOAD_LIMIT:
            why = "host_load"
            print(f"   other processes took {host['other_processes_share']:.0%} of the cores", flush=True)
        elif not visible:
            why = "culprit_not_visible"
            print("   check_blame_traces.py: culprit not visible in this run", flush=True)
        else:
            why = None
        meta["host_during_recording"]["check_blame_traces_ok"] = visible
        write_meta(tmp, meta)
        if why is None or attempt == TRIES:
            break
        rejected[why] += 1
        print("   recording again", flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(result_dir, ignore_errors=True)
    if os.path.exists(final):
        shutil.rmtree(final)
    shutil.move(tmp, final)
    shutil.rmtree(result_dir, ignore_errors=True)
    files = sorted(f for f in os.listdir(final))
    return {"scenario": name, "ok": True, "files": {t: os.path.getsize(os.path.join(final, t)) for t in files}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="root folder, e.g. tests/data/kineto/blame")
    ap.add_argument("--only", nargs="*", default=list(SCENARIOS), help="scenarios to record")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for name in args.only:
        print(f"== {name}", flush=True)
        r = record(name, args.out)
        print(json.dumps({k: v for k, v in r.items() if k != "traceback"}, indent=1), flush=True)
        if not r["ok"]:
            print(r["traceback"], file=sys.stderr)
        results.append(r)
    status_path = os.path.join(args.out, "scenarios.json")
    old = json.load(open(status_path)) if os.path.exists(status_path) else {}
    old.update({r["scenario"]: {"ok": r["ok"], **({"error": r["error"]} if not r["ok"] else {})} for r in results})
    with open(status_path, "w") as f:
        json.dump(old, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
