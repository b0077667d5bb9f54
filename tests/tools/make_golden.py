#!/usr/bin/python3
"""Golden reference data for the engine, from an independent implementation: the same GPT written in PyTorch.

It asks ultrascope-train for its initial weights (--steps 0 --save), loads them into the PyTorch model, and writes
into tests/data/golden_reference.safetensors, for a fixed batch: the loss, the log-probabilities (logits up to a
per-row constant), every parameter gradient, and the losses of 5 AdamW steps (warm-up, cosine decay, weight decay
on matrices only, global grad-norm clipping) on 5 fixed batches. The C++ test (tests/unit/test_golden.cpp) reads
the committed files; nothing in the test suite needs Python.

    /usr/bin/python3 tests/tools/make_golden.py --train-bin build/bin/ultrascope-train --out tests/data
"""
import argparse
import json
import math
import os
import struct
import subprocess
import tempfile

import numpy as np
import torch

from torch_gpt import GPT

CONFIG = dict(vocab=256, hidden=32, layers=2, heads=4, seq=16, batch=2,
              lr=1e-3, min_lr_ratio=0.1, warmup=2, steps=5, weight_decay=0.1, grad_clip=1.0,
              beta1=0.9, beta2=0.95, eps=1e-8, seed=4242)


# ---- safetensors, read and written by hand (8-byte header length, JSON header, raw little-endian data)
def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        assert info["dtype"] == "F32", info["dtype"]
        out[name] = np.frombuffer(data[lo:hi], dtype="<f4").reshape(info["shape"]).copy()
    return out


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = {np.dtype("float32"): "F32", np.dtype("int32"): "I32"}[arr.dtype]
        b = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def lr_at(step, c):
    if c["warmup"] > 0 and step <= c["warmup"]:
        return c["lr"] * step / c["warmup"]
    progress = min(max((step - c["warmup"]) / (c["steps"] - c["warmup"]), 0.0), 1.0)
    min_lr = c["lr"] * c["min_lr_ratio"]
    return min_lr + 0.5 * (c["lr"] - min_lr) * (1.0 + math.cos(math.pi * progress))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-bin", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    c = CONFIG
    torch.set_num_threads(1)
    init_path = os.path.join(args.out, "golden_init.safetensors")
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as data:
        data.write("golden data file: unused beyond validation. " * 200)
        data.flush()
        subprocess.run([args.train_bin, "--vocab", str(c["vocab"]), "--hidden", str(c["hidden"]),
                        "--layers", str(c["layers"]), "--heads", str(c["heads"]), "--seq", str(c["seq"]),
                        "--batch", str(c["batch"]), "--seed", str(c["seed"]), "--steps", "0",
                        "--data", data.name, "--save", init_path, "--quiet"], check=True)
    init = read_safetensors(init_path)

    model = GPT(c["vocab"], c["hidden"], c["layers"], c["heads"], c["seq"])
    state = model.state_dict()
    for name in state:
        state[name].copy_(torch.from_numpy(init[name]))

    rng = np.random.default_rng(7)
    B, T = c["batch"], c["seq"]
    batches = [rng.integers(32, 127, size=(B, T + 1)).astype(np.int32) for _ in range(c["steps"])]
    out = {}
    for i, b in enumerate(batches):
        out[f"batch{i}.tokens"] = b[:, :-1].copy()
        out[f"batch{i}.targets"] = b[:, 1:].copy()

    # loss, log-probabilities and gradients for batch 0 at the initial weights
    idx, tgt = (torch.from_numpy(out["batch0.tokens"]).long(), torch.from_numpy(out["batch0.targets"]).long())
    logits, loss = model(idx, tgt)
    loss.backward()
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    out["logprobs"] = torch.log_softmax(logits, dim=-1).detach().numpy().reshape(B * T, -1)
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().numpy().copy()
    model.zero_grad(set_to_none=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    losses, norms = [], []
    for step in range(1, c["steps"] + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, c)
        b = batches[step - 1]
        _, loss = model(torch.from_numpy(b[:, :-1]).long(), torch.from_numpy(b[:, 1:]).long())
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), c["grad_clip"]).item())
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    out["step_losses"] = np.array(losses, dtype=np.float32)
    out["step_grad_norms"] = np.array(norms, dtype=np.float32)
    for name, p in model.named_parameters():
        out["final." + name] = p.detach().numpy().copy()
    meta = {k: str(v) for k, v in c.items()}
    meta["torch_version"] = torch.__version__
    write_safetensors(os.path.join(args.out, "golden_reference.safetensors"), out, meta)
    print("loss", out["loss"][0], "step losses", losses)


if __name__ == "__main__":
    main()
