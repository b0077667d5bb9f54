#!/usr/bin/python3
"""GPU training throughput of ultrascope-train beside llm.c's train_gpt2cu, on the same GPU, the same shape, the
same tokens.

llm.c (github.com/karpathy/llm.c) is built outside this repository and only run: it is the peer we measure
against, not code we use. Both sides train a GPT-2 from a random initialisation (llm.c: `-e d12` / `-e d24`) in
bf16 at micro-batch B and sequence T, one micro-batch per step, no gradient accumulation. The tokens are the bytes
of our default corpus written in llm.c's token-file format (a 256-int32 header, magic 20240520, version 1, then
uint16 tokens), so both sides see the same token distribution (it matters to the embedding backward).

Figures are measured: the median step time of steps 4..N of each run. MFU is derived for both sides from one
formula, 6N + 12*L*h*s FLOPs per token (docs/formulas.md) over the GPU's dense bf16 peak (989.4 TFLOP/s for an
H100 SXM), so the two columns compare; llm.c's own MFU line uses another FLOP count and is printed beside it.

    python3 tests/bench/bench_vs_llmc.py --llmc PATH/TO/train_gpt2cu [--build build] [--steps 30]
            [--models d12,d24] [--batch 8] [--seq 1024] [--attention flash] [--peak-tflops 989.4]
            [--llmc-args "-r 0"] [--baseline-build OTHER_BUILD]

--baseline-build adds a row for another build of ultrascope-train (the commit before a change), measured in the same
run on the same GPU: before and after side by side.
"""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "assets", "corpus", "default.txt")

# llm.c's depth names and the same model for ultrascope-train (vocabulary padded to 50304 on both sides).
MODELS = {
    "d12": dict(layers=12, hidden=768, heads=12),
    "d24": dict(layers=24, hidden=1024, heads=16),
}
VOCAB = 50304
LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240520, 1, 256


def write_llmc_tokens(path, data):
    """One token per byte of `data`, in llm.c's token-file format."""
    header = [0] * LLMC_HEADER_INTS
    header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, len(data)
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{LLMC_HEADER_INTS}i", *header))
        f.write(struct.pack(f"<{len(data)}H", *data))


def n_params(m):
    """The parameters that multiply: tied embedding and the blocks. llm.c's learned positions (s*h, a lookup) and
    our RoPE (none) do not count, so the FLOP count is the same for both sides."""
    h, L = m["hidden"], m["layers"]
    return VOCAB * h + L * (12 * h * h + 13 * h) + 2 * h


def flops_per_token(m, seq):
    return 6 * n_params(m) + 12 * m["layers"] * m["hidden"] * seq


def median_step_ms(times):
    timed = times[3:] if len(times) > 6 else times
    return statistics.median(timed)


def run_llmc(binary, model, batch, seq, steps, train, val, extra):
    binary = os.path.abspath(binary)  # it runs in its own folder (where llm.c looks for its tokenizer)
    args = [binary, "-i", train, "-j", val, "-e", model, "-b", str(batch), "-t", str(seq), "-d", str(batch * seq),
            "-x", str(steps), "-v", "1000000", "-s", "0", "-h", "0", "-y", "0"] + extra.split()
    out = subprocess.run(args, capture_output=True, text=True, cwd=os.path.dirname(binary))
    if out.returncode != 0:
        sys.exit(f"llm.c failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    step = re.compile(r"step\s+(\d+)/\d+ \| loss ([\d.]+).*\| ([\d.]+) ms \| ([\d.]+)% bf16 MFU")
    rows = [step.search(line) for line in out.stdout.splitlines()]
    rows = [r for r in rows if r]
    times = [float(r.group(3)) for r in rows]
    return dict(step_ms=median_step_ms(times), loss=float(rows[-1].group(2)), own_mfu=float(rows[-1].group(4)),
                first_loss=float(rows[0].group(2)))


def run_ultrascope(build, model, batch, seq, steps, attention, extra):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as m:
        args = [os.path.join(build, "bin", "ultrascope-train"), "--device", "cuda", "--precision", "bf16",
                "--vocab", str(VOCAB), "--seq", str(seq), "--batch", str(batch), "--steps", str(steps),
                "--attention", attention, "--metrics-out", m.name, "--quiet", "--data", CORPUS]
        for k, v in MODELS[model].items():
            args += ["--" + k, str(v)]
        out = subprocess.run(args + extra.split(), capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"ultrascope-train failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        rows = [json.loads(line) for line in open(m.name)]
    return dict(step_ms=median_step_ms([r["step_ms"] for r in rows]), loss=rows[-1]["loss"],
                first_loss=rows[0]["loss"])


def gpu_name():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown GPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc", required=True, help="llm.c's train_gpt2cu, built for this GPU")
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--models", default="d12,d24")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--attention", default="flash")
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="dense bf16 peak of the GPU (H100 SXM)")
    ap.add_argument("--llmc-args", default="", help="extra flags for train_gpt2cu, e.g. '-r 0' (no recompute)")
    ap.add_argument("--ultrascope-args", default="", help="extra flags for ultrascope-train")
    ap.add_argument("--baseline-build", default="", help="another build of ultrascope-train, for a before row")
    args = ap.parse_args()
    for model in args.models.split(","):
        if model not in MODELS:
            sys.exit(f"unknown model '{model}': one of {', '.join(MODELS)}")

    data = open(CORPUS, "rb").read()
    with tempfile.TemporaryDirectory() as tmp:
        train, val = os.path.join(tmp, "train.bin"), os.path.join(tmp, "val.bin")
        split = len(data) * 9 // 10
        write_llmc_tokens(train, data[:split])
        write_llmc_tokens(val, data[split:])
        print(f"GPU: {gpu_name()}; B = {args.batch}, T = {args.seq}, bf16, {args.steps} steps, median of steps 4..N; "
              f"ultrascope --attention {args.attention} {args.ultrascope_args}; llm.c {args.llmc_args or '(defaults)'}")
        print("MFU derived for both from 6N + 12*L*h*s FLOPs per token over "
              f"{args.peak_tflops} TFLOP/s; 'llm.c own' is the MFU llm.c prints (its own FLOP count)")
        print(f"{'model':>5} | {'N':>6} | {'side':>10} | {'step ms':>8} | {'tokens/s':>9} | {'MFU':>6} | "
              f"{'loss first -> last':>18} | llm.c own")
        for model in args.models.split(","):
            m = MODELS[model]
            fpt = flops_per_token(m, args.seq)
            tokens = args.batch * args.seq
            sides = [("ultrascope", run_ultrascope(args.build, model, args.batch, args.seq, args.steps,
                                                   args.attention, args.ultrascope_args)),
                     ("llm.c", run_llmc(args.llmc, model, args.batch, args.seq, args.steps, train, val,
                                        args.llmc_args))]
            if args.baseline_build:
                sides.append(("baseline", run_ultrascope(args.baseline_build, model, args.batch, args.seq,
                                                         args.steps, args.attention, args.ultrascope_args)))
            for side, r in sides:
                tps = tokens / (r["step_ms"] / 1e3)
                own = f"{r['own_mfu']:.1f}%" if "own_mfu" in r else ""
                print(f"{model:>5} | {n_params(m) / 1e6:>5.0f}M | {side:>10} | {r['step_ms']:>8.2f} | "
                      f"{tps:>9.0f} | {tps * fpt / (args.peak_tflops * 1e12):>6.1%} | "
                      f"{r['first_loss']:>7.3f} -> {r['loss']:>7.3f} | {own}", flush=True)
            us, peer = sides[0][1], sides[1][1]
            print(f"{model:>5} | ultrascope / llm.c tokens/s: {peer['step_ms'] / us['step_ms']:.2f}x", flush=True)
            if args.baseline_build:
                base = sides[2][1]
                print(f"{model:>5} | baseline / llm.c tokens/s: {peer['step_ms'] / base['step_ms']:.2f}x; "
                      f"ultrascope / baseline: {base['step_ms'] / us['step_ms']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
