#!/usr/bin/python3
"""Memory by category, ultrascope-train against the same model in PyTorch on the CPU: an independent reference for
the engine's figures (docs/memory.md).

The model: the small preset's shapes (vocab 256, hidden 256, 4 layers, 4 heads, seq 128, micro-batch 8), AdamW,
fp32 and bf16. Both sides run two steps; the figures are those of step 2 (gradients and optimizer state exist).

  ultrascope: the tracked allocator's peaks per category and the peak of their sum (--metrics-out, measured).
  PyTorch:    parameters, gradients and AdamW state: the bytes of those tensors (measured from the tensors);
              activations: the tensors autograd saves for backward during the forward, deduplicated by storage,
              parameters excluded (measured with torch.autograd.graph.saved_tensors_hooks); with autocast the
              bf16 copies of the weights it saves are counted apart; peak of the sum: the tensors alive at the step's
              start plus the highest running sum of the CPU allocations and frees that PyTorch's profiler attributes
              to each op (profile_memory=True, op granularity).

bf16 is not the same recipe on both sides: ultrascope keeps bf16 weights and gradients with fp32 master weights
(the Playbook's mixed precision); PyTorch's autocast keeps fp32 weights and gradients and casts to bf16 per op.

    /usr/bin/python3 tests/bench/bench_memory_vs_pytorch.py [--build build]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = dict(vocab=256, hidden=256, layers=4, heads=4, seq=128, batch=8)
MiB = 2.0**20


def run_ultrascope(build, precision, data):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as m:
        args = [os.path.join(build, "bin", "ultrascope-train"), "--threads", "2", "--steps", "2", "--data", data,
                "--precision", precision, "--metrics-out", m.name, "--quiet"]
        for k, v in SHAPE.items():
            args += ["--" + k, str(v)]
        subprocess.run(args, check=True)
        rows = [json.loads(line) for line in open(m.name)]
    step2 = rows[-1]
    return {"categories": step2["mem_peak_by_category"], "peak": step2["mem_peak_bytes"]}


PYTORCH = r"""
import json, sys
sys.path.insert(0, TOOLS)
import numpy as np, torch
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
torch.set_num_threads(2)
s = SHAPE
model = GPT(s['vocab'], s['hidden'], s['layers'], s['heads'], s['seq'])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
B, T = s['batch'], s['seq']
x = torch.randint(0, s['vocab'], (B, T)); y = torch.randint(0, s['vocab'], (B, T))
param_storages = {p.untyped_storage().data_ptr() if hasattr(p, 'untyped_storage') else p.storage().data_ptr()
                  for p in model.parameters()}
def storage_of(t):
    st = t.untyped_storage() if hasattr(t, 'untyped_storage') else t.storage()
    return st.data_ptr(), st.nbytes()
def step(saved=None):
    ctx = torch.autocast('cpu', dtype=torch.bfloat16) if BF16 else torch.autocast('cpu', enabled=False)
    if saved is None:
        with ctx:
            _, loss = model(x, y)
    else:
        def pack(t):
            ptr, n = storage_of(t)
            if ptr not in param_storages:
                is_weight_cast = BF16 and t.dtype == torch.bfloat16 and any(t.shape == p.shape for p in model.parameters() if p.dim() == 2)
                saved.setdefault('weight_casts' if is_weight_cast else 'activations', {})[ptr] = n
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), ctx:
            _, loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
step()  # step 1: gradients and AdamW state appear
def nbytes(ts): return sum(t.numel() * t.element_size() for t in ts)
params = nbytes(model.parameters())
grads = nbytes(p.grad for p in model.parameters())
state = sum(nbytes(v for v in st.values() if torch.is_tensor(v)) for st in opt.state.values())
saved = {}
with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
    step(saved)
events = sorted((e for e in prof.events() if e.cpu_memory_usage != 0 or e.name == '[memory]'),
                key=lambda e: e.time_range.start)
running, top = 0, 0
for e in events:  # each op's own allocations and frees, in order: the running sum of what the step allocated
    running += e.self_cpu_memory_usage if e.name != '[memory]' else e.cpu_memory_usage
    top = max(top, running)
print(json.dumps({'params': params, 'grads': grads, 'optimizer_state': state,
                  'activations': sum(saved.get('activations', {}).values()),
                  'weight_casts': sum(saved.get('weight_casts', {}).values()),
                  'peak': params + grads + state + top, 'torch': torch.__version__}))
"""


def run_pytorch(bf16):
    code = PYTORCH.replace("TOOLS", repr(os.path.join(HERE, "..", "tools"))).replace("SHAPE", repr(SHAPE))
    code = code.replace("BF16", "True" if bf16 else "False")
    code = "from torch_gpt import GPT\n".join(code.split("from torch.profiler import profile, ProfilerActivity\n", 1))
    code = code.replace("import numpy as np, torch\n", "import numpy as np, torch\nfrom torch.profiler import profile, ProfilerActivity\n", 1)
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")
    out = subprocess.run(["/usr/bin/python3", "-c", code], check=True, env=env, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def mib(b):
    return f"{b / MiB:.2f}" if b is not None else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "assets", "corpus", "default.txt"))
    a = ap.parse_args()
    h, v, L = SHAPE["hidden"], SHAPE["vocab"], SHAPE["layers"]
    n = h * v + L * (12 * h * h + 13 * h) + 2 * h
    print(f"model: {SHAPE}, N = {n:,} parameters; step 2 of 2; MiB, measured on both sides")
    for precision in ("fp32", "bf16"):
        us = run_ultrascope(a.build, precision, a.data)
        pt = run_pytorch(precision == "bf16")
        c = us["categories"]
        print(f"\n{precision} (torch {pt['torch']})")
        print(f"  {'category':<18} {'ultrascope':>10} {'PyTorch':>10}   note")
        rows = [
            ("params", c["params"], pt["params"], "ultrascope bf16: bf16 weights; autocast: fp32 weights"),
            ("grads", c["grads"], pt["grads"], ""),
            ("master_params", c.get("master_params", 0), None, "PyTorch's autocast keeps no separate master copy"),
            ("optimizer_state", c["optimizer_state"], pt["optimizer_state"], "PyTorch adds AdamW's step counters"),
            ("activations", c["activations"], pt["activations"],
             "PyTorch: tensors saved for backward (embedding, logits and loss included)"),
            ("weight casts", None, pt["weight_casts"] if precision == "bf16" else None,
             "autocast's bf16 copies of the weights, saved for backward"),
            ("temporaries", c["temporaries"], None, "backward's activation gradients (PyTorch: inside the peak below)"),
            ("workspace", c.get("workspace", 0), None, ""),
            ("peak of the sum", us["peak"], pt["peak"], "PyTorch: live tensors + the profiler's running allocations"),
        ]
        for name, u, p, note in rows:
            print(f"  {name:<18} {mib(u):>10} {mib(p):>10}   {note}")


if __name__ == "__main__":
    main()
