#!/usr/bin/env python3
"""Records small, real torch.profiler (Kineto) traces of a tiny GPT trained on gloo CPU ranks, one folder per
parallelism scenario (DDP, FSDP2, pipeline schedules, tensor parallel, 2-D), for Ultrascope's Kineto reader tests.
Run through tests/tools/record_pytorch_traces.sh, which makes the venv with torch and writes tests/data/kineto/."""
import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

# The model: a plain GPT of our own, small enough that one rank's trace stays well under 300 KB compressed.
VOCAB, SEQ, HIDDEN, HEADS, BATCH = 256, 64, 64, 4, 8
PROFILER_SCHEDULE = dict(wait=1, warmup=1, active=2, repeat=1)
STEPS = PROFILER_SCHEDULE["wait"] + PROFILER_SCHEDULE["warmup"] + PROFILER_SCHEDULE["active"]


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = HIDDEN // HEADS
        self.q, self.k, self.v = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.q(x), self.k(x), self.v(x)
        heads = q.shape[-1] // self.head_dim  # fewer heads per rank under tensor parallelism (column-split q/k/v)
        q, k, v = (z.view(b, t, heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, heads * self.head_dim))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.proj = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(HIDDEN), SelfAttention(), nn.LayerNorm(HIDDEN), Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    """The whole model (first and last set) or one pipeline stage's slice of it."""

    def __init__(self, layers, first=True, last=True):
        super().__init__()
        self.first, self.last = first, last
        if first:
            self.tok_emb, self.pos_emb = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(SEQ, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        if last:
            self.ln_f, self.head = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB)

    def forward(self, x):
        if self.first:
            x = self.tok_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)) if self.last else x


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def batch_for(step, data_rank):
    """Deterministic tokens; ranks that hold replicas of one data shard (TP, PP) get the same batch."""
    g = torch.Generator().manual_seed(1000 * step + data_rank)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


TP_PLAN_NAMES = {"attn.q": "colwise", "attn.k": "colwise", "attn.v": "colwise", "attn.proj": "rowwise",
                 "mlp.fc": "colwise", "mlp.proj": "rowwise"}


def tp_plan():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    return {name: ColwiseParallel() if kind == "colwise" else RowwiseParallel() for name, kind in TP_PLAN_NAMES.items()}


# ---- scenarios: each returns (step_fn(step), meta) for this rank ----

def setup_ddp(rank, world, layers):
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(Gpt(layers))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(i):
        x, y = batch_for(i, rank)
        loss_of(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"layout": {"dp": world}, "parallelism": "DistributedDataParallel over the default process group"}


def setup_fsdp2(rank, world, layers):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    model = Gpt(layers)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(i):
        x, y = batch_for(i, rank)
        loss_of(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"layout": {"dp": world},
                  "parallelism": "FSDP2 fully_shard per block and on the root, 1-D DeviceMesh 'dp'"}


def setup_tp(rank, world, layers):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    model = Gpt(layers)
    for block in model.blocks:
        parallelize_module(block, mesh, tp_plan())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(i):
        x, y = batch_for(i, 0)  # one data shard: every TP rank sees the same batch
        loss_of(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"layout": {"tp": world}, "tp_plan": TP_PLAN_NAMES,
                  "parallelism": "DTensor tensor parallelism (parallelize_module) on every block's attention and MLP; "
                                 "embeddings and head replicated"}


def setup_dp2_tp2(rank, world, layers):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    model = Gpt(layers)
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], tp_plan())
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dp_rank = mesh["dp"].get_local_rank()

    def step(i):
        x, y = batch_for(i, dp_rank)
        loss_of(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"layout": {"dp": 2, "tp": world // 2}, "mesh": mesh.mesh.tolist(), "mesh_dim_names": ["dp", "tp"],
                  "tp_plan": TP_PLAN_NAMES,
                  "parallelism": "2-D DeviceMesh (dp, tp): TP inside 'tp' rows, FSDP2 fully_shard over 'dp' columns"}


def make_pipeline_setup(schedule_name, stages_per_rank):
    def setup(rank, world, layers):
        from torch.distributed import pipelining
        num_stages = world * stages_per_rank
        assert layers % num_stages == 0
        stage_ids = [rank + world * v for v in range(stages_per_rank)]  # looped placement: rank r holds r, r+world
        stages, params = [], []
        for s in stage_ids:
            torch.manual_seed(s)
            mod = Gpt(layers // num_stages, first=(s == 0), last=(s == num_stages - 1))
            params += list(mod.parameters())
            stages.append(pipelining.PipelineStage(mod, s, num_stages, torch.device("cpu")))
        cls = getattr(pipelining, schedule_name)
        sched = cls(stages if stages_per_rank > 1 else stages[0], n_microbatches=MICRO_BATCHES, loss_fn=loss_of)
        opt = torch.optim.AdamW(params, lr=1e-3)
        holds_first = 0 in stage_ids
        holds_last = (num_stages - 1) in stage_ids

        def step(i):
            x, y = batch_for(i, 0)
            args = (x,) if holds_first else ()
            kwargs = {"target": y, "losses": []} if holds_last else {}
            sched.step(*args, **kwargs)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step, {"layout": {"pp": world}, "schedule": schedule_name, "micro_batches": MICRO_BATCHES,
                      "stages": num_stages, "stages_per_rank": stages_per_rank,
                      "stages_of_rank": {str(r): [r + world * v for v in range(stages_per_rank)] for r in range(world)},
                      "layers_per_stage": layers // num_stages, "placement": "looped (stage s on rank s % world)",
                      "parallelism": f"torch.distributed.pipelining {schedule_name}"}
    return setup


MICRO_BATCHES = 4

# name -> (setup, world size, layers, file naming)
SCENARIOS = {
    "ddp": (setup_ddp, 2, 2, "tensorboard"),
    "fsdp2": (setup_fsdp2, 2, 2, "megatron"),
    "pipeline_gpipe": (make_pipeline_setup("ScheduleGPipe", 1), 2, 2, "megatron"),
    "pipeline_1f1b": (make_pipeline_setup("Schedule1F1B", 1), 2, 2, "megatron"),
    "pipeline_interleaved": (make_pipeline_setup("ScheduleInterleaved1F1B", 2), 2, 4, "megatron"),
    "tp": (setup_tp, 2, 2, "torchtitan"),
    "dp2_tp2": (setup_dp2_tp2, 4, 2, "torchtitan"),
}

NAMING_TEXT = {
    "tensorboard": "tensorboard_trace_handler(dir, use_gzip=True) with its default worker name: "
                   "<host>_<pid>.<ms>.pt.trace.json.gz (rank only in distributedInfo)",
    "megatron": "Megatron-LM style rank-R.json.gz via export_chrome_trace",
    "torchtitan": "torchtitan style iteration_N/rankR_trace.json.gz via export_chrome_trace (N = prof.step_num)",
}


def trace_handler(naming, out_dir, rank):
    if naming == "tensorboard":
        return tensorboard_trace_handler(out_dir, use_gzip=True)
    if naming == "megatron":
        return lambda p: p.export_chrome_trace(os.path.join(out_dir, f"rank-{rank}.json.gz"))

    def titan(p):
        d = os.path.join(out_dir, f"iteration_{p.step_num}")
        os.makedirs(d, exist_ok=True)
        p.export_chrome_trace(os.path.join(d, f"rank{rank}_trace.json.gz"))
    return titan


# The columns of export_memory_timeline's sizes (torch/profiler/_memory_profiler.py: a leading unused slot, then
# _CATEGORY_TO_INDEX's order, None = not categorised).
MEMORY_TIMELINE_COLUMNS = ["unused", "parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
                           "autograd_detail", "unknown"]


def export_memory_timeline(prof, out_dir):
    """DDP rank 0 only: the profiler's memory timeline (needs with_stack=True in this torch)."""
    path = os.path.join(out_dir, "memory_timeline_rank0.json.gz")
    try:
        prof.export_memory_timeline(path, device="cpu")
        return {"memory_timeline": {
            "file": os.path.basename(path),
            "format": "[times, sizes]: times in microseconds on the profiler's clock (the trace's ts + "
                      "baseTimeNanoseconds/1000), sizes[i] = bytes per category at times[i]",
            "size_columns": MEMORY_TIMELINE_COLUMNS, "device": "cpu",
            "api": "torch.profiler.profile.export_memory_timeline(path, device='cpu')"}}
    except Exception as e:  # noqa: BLE001 - record why, the traces are still useful
        return {"memory_timeline_error": f"{type(e).__name__}: {e}"}


def worker(rank, world, name, out_dir, port, result_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    setup, _, layers, naming = SCENARIOS[name]
    extra = {}
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        step, meta = setup(rank, world, layers)
        want_timeline = name == "ddp" and rank == 0
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(**PROFILER_SCHEDULE),
                     on_trace_ready=trace_handler(naming, out_dir, rank), record_shapes=True, profile_memory=True,
                     with_stack=want_timeline) as prof:
            for i in range(STEPS):
                step(i)
                prof.step()
        if want_timeline:
            extra = export_memory_timeline(prof, out_dir)
        dist.barrier()
        dist.destroy_process_group()
        meta.update(extra)
        meta.update(layers=layers, file_naming=NAMING_TEXT[naming], with_stack_on_rank0=want_timeline)
        with open(os.path.join(result_dir, f"meta-{rank}.json"), "w") as f:
            json.dump(meta, f)
    except Exception:
        with open(os.path.join(result_dir, f"error-{rank}.txt"), "w") as f:
            f.write(traceback.format_exc())
        raise


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(name, out_root):
    _, world, layers, naming = SCENARIOS[name]
    final = os.path.join(out_root, name)
    tmp = tempfile.mkdtemp(prefix=f"kineto-{name}-")
    result_dir = tempfile.mkdtemp(prefix=f"kineto-{name}-result-")
    try:
        mp.spawn(worker, args=(world, name, tmp, free_port(), result_dir), nprocs=world, join=True)
    except Exception as e:  # noqa: BLE001
        errors = [open(os.path.join(result_dir, f)).read() for f in sorted(os.listdir(result_dir))
                  if f.startswith("error-")]
        shutil.rmtree(tmp, ignore_errors=True)
        return {"scenario": name, "ok": False, "error": (errors[0] if errors else str(e)).strip().splitlines()[-1],
                "traceback": errors[0] if errors else str(e)}
    meta = json.load(open(os.path.join(result_dir, "meta-0.json")))
    files = sorted(os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs)
    traces = [f for f in files if f.endswith(".json.gz") and "memory_timeline" not in f]
    meta = {"scenario": name, "ranks": world, **meta,
            "profiler": {"activities": ["CPU"], "schedule": PROFILER_SCHEDULE, "record_shapes": True,
                         "profile_memory": True,
                         "with_stack": "rank 0 only" if meta.get("with_stack_on_rank0") else False},
            "steps_run": STEPS,
            "steps_recorded": list(range(PROFILER_SCHEDULE["wait"] + PROFILER_SCHEDULE["warmup"], STEPS)),
            "steps_recorded_note": "Kineto's ProfilerStep#N numbers (0-based) of the active steps",
            "model": {"vocab": VOCAB, "seq": SEQ, "hidden": HIDDEN, "heads": HEADS, "layers": layers,
                      "batch_per_step": BATCH, "optimizer": "AdamW lr 1e-3", "dtype": "float32"},
            "backend": "gloo", "device": "cpu", "torch": torch.__version__, "trace_files": traces}
    if os.path.exists(final):
        shutil.rmtree(final)
    shutil.move(tmp, final)
    with open(os.path.join(final, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    shutil.rmtree(result_dir, ignore_errors=True)
    return {"scenario": name, "ok": True, "files": {t: os.path.getsize(os.path.join(final, t)) for t in files}}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, help="root folder, e.g. tests/data/kineto")
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
