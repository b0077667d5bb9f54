#!/usr/bin/python3
"""Training throughput of ultrascope-train against the same model in PyTorch, on the same CPU threads.

The model: hidden 256, 4 layers, 4 heads, seq 256, micro-batch 8, fp32, AdamW (tests/tools/torch_gpt.py is the
PyTorch side). For 1 and 2 threads (or --threads) it prints tokens/s of both, their ratio, the measured sgemm peak of the BLAS on
those threads, each one's MFU (6N + 12*L*h*s FLOPs per token against that peak), and the BLAS kernels in use.

A second table trains the same model at seq 1024 with --attention naive and flash (tokens/s, activation peak):
the s x s probabilities against the blockwise online softmax.

A third table trains SHAPE in fp32 and in bf16 on the same threads (tokens/s and their ratio) and names the bf16
GEMM kernel that ran (the AVX-512 BF16 one, or fp32 sgemm on rounded inputs where the CPU has no BF16).

    /usr/bin/python3 tests/bench/bench_vs_pytorch.py [--build build] [--steps 30] [--attention-steps 8]
                     [--precision-steps 20] [--python PYTHON_WITH_TORCH] [--threads 1,2]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from bench_common import cpu_features  # noqa: E402

SHAPE = dict(vocab=256, hidden=256, layers=4, heads=4, seq=256, batch=8)


def n_params(s):
    h, v, L = s["hidden"], s["vocab"], s["layers"]
    return h * v + L * (12 * h * h + 13 * h) + 2 * h


def flops_per_token(s):
    return 6 * n_params(s) + 12 * s["layers"] * s["hidden"] * s["seq"]


OPENMP_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"


def run_ultrascope(build, threads, steps, data, precision="fp32"):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as m:
        args = [os.path.join(build, "bin", "ultrascope-train"), "--threads", str(threads), "--steps", str(steps),
                "--warmup", "5", "--lr", "1e-3", "--data", data, "--metrics-out", m.name, "--quiet",
                "--precision", precision]
        for k, v in SHAPE.items():
            args += ["--" + k, str(v)]
        subprocess.run(args, check=True, env=env)
        rows = [json.loads(line) for line in open(m.name)]
    timed = rows[5:]  # the first steps warm caches and the allocator up
    return sum(r["tokens"] for r in timed) / (sum(r["step_ms"] for r in timed) / 1e3), rows[-1]["loss"]


def run_attention(build, attention, threads, steps, data, seq=1024):
    """ultrascope-train on SHAPE at `seq` with --attention naive|flash: tokens/s over steps 3..N, activation peak."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as m:
        args = [os.path.join(build, "bin", "ultrascope-train"), "--threads", str(threads), "--steps", str(steps),
                "--warmup", "2", "--lr", "1e-3", "--data", data, "--metrics-out", m.name, "--quiet",
                "--attention", attention]
        for k, v in dict(SHAPE, seq=seq).items():
            args += ["--" + k, str(v)]
        subprocess.run(args, check=True, env=env)
        rows = [json.loads(line) for line in open(m.name)]
    timed = rows[2:]
    tps = sum(r["tokens"] for r in timed) / (sum(r["step_ms"] for r in timed) / 1e3)
    return tps, rows[-1]["mem_peak_by_category"]["activations"], rows[-1]["loss"]


def backend_description(build, precision):
    """The trainer's own line for its backend: threads, OpenBLAS kernel and the bf16 GEMM kernel it picked."""
    out = subprocess.run([os.path.join(build, "bin", "ultrascope-train"), "--precision", precision, "--steps", "1",
                          "--hidden", "64", "--layers", "1", "--heads", "2", "--seq", "16", "--batch", "1"],
                         capture_output=True, text=True)
    for line in out.stdout.splitlines() + out.stderr.splitlines():
        if "bf16 GEMM" in line:
            return line[line.find(" on ") + 4:line.rfind("), ") + 1] if " on " in line else line.strip()
    return "unknown"


def run_pytorch(python, threads, steps, data, openmp_blas):
    """In a child process so that the thread settings are fresh. Debian's torch calls libblas.so.3, which the
    alternatives system points at the pthread build of OpenBLAS; with openmp_blas the OpenMP build (the one
    ultrascope links) is put first on the library path, so both sides run the same BLAS the same way."""
    code = f"""
import os, sys, time, json, math
sys.path.insert(0, {os.path.join(HERE, '..', 'tools')!r})
import numpy as np, torch
torch.set_num_threads({threads})
from torch_gpt import GPT
s = {SHAPE!r}
torch.manual_seed(0)
model = GPT(s['vocab'], s['hidden'], s['layers'], s['heads'], s['seq'])
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{{'params': decay, 'weight_decay': 0.1}}, {{'params': no_decay, 'weight_decay': 0.0}}],
                        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
data = np.frombuffer(open({data!r}, 'rb').read(), dtype=np.uint8)
B, T = s['batch'], s['seq']
rng = np.random.default_rng(0)
times, loss = [], None
for step in range({steps}):
    starts = rng.integers(0, len(data) - T - 1, size=B)
    x = torch.from_numpy(np.stack([data[i:i + T] for i in starts]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[i + 1:i + T + 1] for i in starts]).astype(np.int64))
    t0 = time.perf_counter()
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t0)
timed = times[5:]
print(json.dumps({{'tokens_per_s': B * T * len(timed) / sum(timed), 'loss': loss.item(),
                  'torch': torch.__version__, 'threads': torch.get_num_threads()}}))
"""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if openmp_blas:
        env["LD_LIBRARY_PATH"] = OPENMP_OPENBLAS
    out = subprocess.run([python, "-c", code], check=True, env=env, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def torch_blas_kernel(python):
    """The OpenBLAS that torch's libblas.so.3 resolves to (Debian's alternatives system picks it)."""
    code = ("import torch, ctypes\n"
            "for name in ('libblas.so.3', 'libopenblas.so.0'):\n"
            "    try:\n"
            "        lib = ctypes.CDLL(name); lib.openblas_get_corename.restype = ctypes.c_char_p\n"
            "        print(lib.openblas_get_corename().decode(), os.path.realpath('/usr/lib/x86_64-linux-gnu/' + name) if False else name); break\n"
            "    except Exception: pass\n")
    out = subprocess.run([python, "-c", "import os\n" + code], capture_output=True, text=True)
    if out.stdout.strip():
        return out.stdout.strip()
    # A pip wheel of torch carries its own BLAS (MKL on x86) and loads no libblas.so.3.
    cfg = subprocess.run([python, "-c", "import torch; print(torch.__config__.show())"], capture_output=True,
                         text=True).stdout
    blas = [line.split("=", 1)[1].strip() for line in cfg.splitlines() if "BLAS_INFO" in line]
    return f"torch's own ({blas[0]})" if blas else "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--attention-steps", type=int, default=8, help="steps of the seq-1024 table (0: skip it)")
    ap.add_argument("--precision-steps", type=int, default=20, help="steps of the fp32 vs bf16 table (0: skip it)")
    ap.add_argument("--python", default="/usr/bin/python3", help="the interpreter whose torch is compared")
    ap.add_argument("--threads", default="1,2", help="thread counts of the throughput and precision tables")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "assets", "corpus", "default.txt"))
    args = ap.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    like_with_like = os.path.isdir(OPENMP_OPENBLAS)
    described = backend_description(args.build, "fp32")
    if "set by ultrascope" in described and "OPENBLAS_CORETYPE" not in os.environ:
        # OpenBLAS fell back to a generic kernel on this CPU and the trainer restarted itself on the right one
        # (engine/backend/cpu/blas_kernel.h): give PyTorch's OpenBLAS, if it uses one, the same kernel.
        coretype = described.split("OPENBLAS_CORETYPE=")[1].split()[0]
        os.environ["OPENBLAS_CORETYPE"] = coretype
        print(f"note: {described}; OPENBLAS_CORETYPE={coretype} is set for both sides")
    fpt = flops_per_token(SHAPE)
    print(f"model: {SHAPE}, N = {n_params(SHAPE):,} parameters, {fpt / 1e6:.1f} MFLOP per token (6N + 12*L*h*s)")
    print(f"CPU: {cpu_features()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; "
          f"PyTorch's BLAS: {torch_blas_kernel(args.python)}; ultrascope links OpenBLAS (OpenMP build)")
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; the last column is "
          "the same after each row (other work on the machine shows in both sides' figures, unevenly)")
    print(f"pytorch = {args.python}'s torch as installed; pytorch-omp = the same with the OpenMP OpenBLAS that "
          "ultrascope links (like with like; '-' where that OpenBLAS is not installed or torch does not load "
          "libblas). Figures are measured: tokens/s over steps 6..N.")
    print(f"{'threads':>7} | {'sgemm peak':>10} | {'ultrascope':>10} | {'pytorch':>10} | {'pytorch-omp':>11} | "
          f"{'ratio':>5} | {'ratio-omp':>9} | {'MFU us':>6} | {'MFU pt':>6} | {'MFU pt-omp':>10} | kernel | load")
    for threads in thread_counts:
        peak = json.loads(subprocess.run([os.path.join(args.build, "bin", "bench_sgemm_peak"), str(threads)],
                                         check=True, capture_output=True, text=True).stdout)
        us_tps, _ = run_ultrascope(args.build, threads, args.steps, args.data)
        pt = run_pytorch(args.python, threads, args.steps, args.data, openmp_blas=False)["tokens_per_s"]
        pto = (run_pytorch(args.python, threads, args.steps, args.data, openmp_blas=True)["tokens_per_s"]
               if like_with_like else None)
        peak_flops = peak["gflops"] * 1e9
        omp = (f"{pto:>7.0f} t/s", f"{us_tps / pto:>9.2f}", f"{pto * fpt / peak_flops:>10.1%}") if pto else \
            (f"{'-':>11}", f"{'-':>9}", f"{'-':>10}")
        print(f"{threads:>7} | {peak['gflops']:>6.1f} GF/s | {us_tps:>6.0f} t/s | {pt:>6.0f} t/s | {omp[0]} | "
              f"{us_tps / pt:>5.2f} | {omp[1]} | {us_tps * fpt / peak_flops:>6.1%} | "
              f"{pt * fpt / peak_flops:>6.1%} | {omp[2]} | {peak['blas_kernel']} | "
              f"{os.getloadavg()[0]:.2f}")
    if args.attention_steps > 0:
        threads = 2
        print(f"\nseq 1024, {threads} threads, {args.attention_steps} steps (tokens/s over steps 3..N, measured; "
              "activation peak measured by the tracked allocator):")
        print(f"{'attention':>9} | {'tokens/s':>9} | {'activation peak':>15} | loss at the end")
        for attention in ("naive", "flash"):
            tps, act, loss = run_attention(args.build, attention, threads, args.attention_steps, args.data)
            print(f"{attention:>9} | {tps:>9.0f} | {act / 2**20:>11.1f} MiB | {loss:.4f}")
    if args.precision_steps > 0:
        print(f"\nfp32 against bf16, {args.precision_steps} steps (tokens/s over steps 6..N, measured); "
              f"{backend_description(args.build, 'bf16')}")
        print(f"{'threads':>7} | {'fp32 t/s':>9} | {'bf16 t/s':>9} | bf16 / fp32 | loss fp32 / bf16")
        for threads in thread_counts:
            fp32, loss32 = run_ultrascope(args.build, threads, args.precision_steps, args.data, "fp32")
            bf16, loss16 = run_ultrascope(args.build, threads, args.precision_steps, args.data, "bf16")
            print(f"{threads:>7} | {fp32:>9.0f} | {bf16:>9.0f} | {bf16 / fp32:>11.2f} | {loss32:.4f} / {loss16:.4f}")


if __name__ == "__main__":
    main()
