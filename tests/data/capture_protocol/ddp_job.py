# A tiny data-parallel PyTorch job for the capture tests: 2 ranks under torchrun, gloo on the CPU, a few ms per
# optimizer step, for --seconds (or until killed). Nothing in it knows about Ultrascope: the job is attached to
# only through KINETO_USE_DAEMON=1 in its environment (docs/attach-pytorch.md).
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=120)
parser.add_argument("--sleep-ms", type=float, default=5)
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
end = time.time() + args.seconds
step = 0
while time.time() < end:
    x = torch.randn(32, 64)
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    time.sleep(args.sleep_ms / 1000)
if dist.get_rank() == 0:
    print(f"ddp_job: {step} steps, pid {os.getpid()}", flush=True)
dist.destroy_process_group()
