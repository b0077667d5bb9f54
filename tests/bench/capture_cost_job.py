"""The job bench_capture_cost.py measures: 2 ranks under torchrun, gloo DDP on the CPU, a few tens of ms an
optimizer step, for --steps steps. Each rank appends one line per step (index, wall-clock end, perf_counter
duration) to its own log, so that the bench can tell the steps a capture traced from the others. Nothing in it
knows about Ultrascope: KINETO_USE_DAEMON=1 in its environment is the only difference between the configurations."""
import argparse
import ctypes
import os
import signal
import time

# Die with torchrun (its workers run in sessions of their own, out of reach of a kill of its process group).
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() == 1:
    raise SystemExit("capture_cost_job: torchrun exited before this rank started")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--log-dir", required=True)
parser.add_argument("--width", type=int, default=512)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
w = args.width
model = DDP(torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                                torch.nn.Linear(w, 16)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
with open(os.path.join(args.log_dir, f"pid{rank}"), "w") as f:
    f.write(f"{os.getpid()} {torch.get_num_threads()}")
log = open(os.path.join(args.log_dir, f"steps{rank}.log"), "w", buffering=1)
for step in range(args.steps):
    t0 = time.perf_counter()
    x = torch.randn(128, w)
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    dt = time.perf_counter() - t0
    log.write(f"{step} {time.time():.6f} {dt * 1e3:.3f}\n")
log.close()
dist.destroy_process_group()
