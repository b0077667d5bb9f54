#!/usr/bin/env python3
"""The planner checked against measurements on this machine: `ultrascope calibrate` once, then for each layout
`ultrascope plan --cluster machine.json` (predicted) next to `ultrascope run` of the same flags (measured): step time
(the best steady step, each step as long as its slowest rank: this machine is shared) and peak memory of the busiest rank (the sum of the modelled
categories' peaks: params, grads, master weights, optimizer state, activations, temporaries). Timing rows use at most
as many ranks as cores, one thread each; rows with more ranks than cores are oversubscribed and compared on memory only.
Targets (docs/planner.md): memory within 2% on every row; step time within 5% mean absolute error and 10% on the
worst row, three runs in a row on a quiet machine.

    python3 tests/bench/bench_planner.py [--build build] [--steps 6] [--machine FILE (skip calibrate)] [--only TEXT]
    python3 tests/bench/bench_planner.py --nodes 2 --inter-node-gbps 1 [--only TEXT]   # two link levels (root)

With --nodes N the machine is calibrated on N emulated nodes (`ultrascope calibrate --nodes N`: its inter-node link
measured over the shaped veth link, docs/nodes.md) and every run is launched onto them (`ultrascope run --nodes N`),
so the planner's two link levels are checked: a group whose ranks span nodes is predicted on the inter-node link.
Only layouts with at most as many ranks as cores run (one rank a node with 2 cores and 2 nodes).
    python3 tests/bench/bench_planner.py --published   # the planner next to published large-scale runs (no runs)
    python3 tests/bench/bench_planner.py --search [--repeat 3] [--before-binary OLD/ultrascope]
        # how long the search takes (no runs): one thread evaluating every layout from scratch, the same with the
        # search's shared work, and the default (shared work on every core), side by side, every layout's output
        # compared byte for byte; --before-binary also times another build (e.g. main's) on the same searches.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

from bench_common import MPI_ENV, cpu_features

# (label, ranks, flags): the small preset (h 256, 4 layers, seq 128), fp32, one thread per rank.
LAYOUTS = [
    ("dp 2", 2, "--dp 2"),
    ("dp 2 ZeRO-1", 2, "--dp 2 --zero 1"),
    ("dp 2 ZeRO-2 m 2", 2, "--dp 2 --zero 2 --grad-accum 2"),
    ("dp 2 ZeRO-3", 2, "--dp 2 --zero 3"),
    ("dp 2 recompute full", 2, "--dp 2 --recompute full"),
    ("dp 2 recompute selective", 2, "--dp 2 --recompute selective"),
    ("dp 2 no overlap, batch 4", 2, "--dp 2 --no-overlap --batch 4"),
    ("tp 2", 2, "--tp 2"),
    ("tp 2 sp", 2, "--tp 2 --sp"),
    ("pp 2 afab m 4", 2, "--pp 2 --pp-schedule afab --grad-accum 4"),
    ("pp 2 1f1b m 4", 2, "--pp 2 --pp-schedule 1f1b --grad-accum 4"),
    ("pp 2 interleaved m 4", 2, "--pp 2 --pp-schedule interleaved --pp-chunks 2 --grad-accum 4"),
    ("pp 2 zb1 m 4", 2, "--pp 2 --pp-schedule zb1 --grad-accum 4"),
    ("cp 2", 2, "--cp 2 --batch 4 --seq 256"),
    ("cp 2 all-gather", 2, "--cp 2 --cp-comm allgather --batch 4 --seq 256"),
    ("dp 2 ep 2 (MoE)", 2, "--dp 2 --ep 2 --preset small-moe"),
    ("dp 2 x pp 2 (4 ranks)", 4, "--dp 2 --pp 2 --grad-accum 4"),
    ("dp 2 x tp 2 (4 ranks)", 4, "--dp 2 --tp 2 --sp"),
]


# Published large-scale runs. Megatron-LM (Narayanan et al. 2021, Table 1): GPT on A100s, vocabulary 51200, sequence
# 2048; (params, heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU, % of peak). Their FLOPs count the
# recomputed forward (96 B s l h^2 (1 + s/6h + V/16lh)), so their "% of peak" is compared with the planner's
# throughput counted the same way; the planner's MFU (6N + 12 L h s, no recomputation) is shown too.
MEGATRON = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137, 44), ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138, 44),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142, 46), ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135, 43),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138, 44), ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140, 45),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148, 47), ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155, 50),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163, 52), ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163, 52),
]
# Llama 3 405B on H100s (Dubey et al. 2024, Table 4): (GPUs, tp, cp, pp, dp, seq, sequences per dp rank, TFLOP/s, MFU %).
LLAMA3 = [(8192, 8, 1, 16, 64, 8192, 32, 430, 43), (16384, 8, 1, 16, 128, 8192, 16, 400, 41),
          (16384, 8, 16, 16, 8, 131072, 16, 380, 38)]


def published(u):
    """One rule per source, nothing tuned per row: Megatron rows run micro-batch 1, 1F1B, full recomputation, no
    ZeRO, naive attention (2021), bf16, the gradients reduced in fp32 after the backward (2021 Megatron-LM's data
    parallelism), on a100-selene-2021 (HDR 200 Gb/s per GPU; one host overhead fitted to the whole table); Llama 3 rows
    micro-batch 1, interleaved x2, no recomputation, ZeRO-1, flash attention, bf16, context parallelism as all-gathers
    (Meta's, section 3.3.2) on h100-sxm."""
    print("Megatron-LM (Narayanan et al. 2021, Table 1) on a100-selene-2021: rule: micro-batch 1, 1f1b, full "
          "recompute, ZeRO-0, naive attention, bf16, fp32 gradients reduced after the backward")
    print(f"{'model':>8} {'GPUs':>5} {'tp':>2} {'pp':>2} {'dp':>3} | {'published':>9} {'planner':>8} {'ratio':>5} | "
          f"{'planner MFU':>11} | fits  memory")
    for name, heads, h, L, tp, pp, gpus, B, tflops, pct in MEGATRON:  # noqa: B007
        dp = gpus // (tp * pp)
        flags = (f"--layers {L} --hidden {h} --heads {heads} --vocab 51200 --seq 2048 --dp {dp} --tp {tp} --pp {pp} "
                 f"--batch 1 --grad-accum {B // dp} --recompute full --precision bf16 --attention naive "
                 f"--pp-schedule 1f1b --fp32-grad-accum --no-overlap" + (" --sp" if tp > 1 else ""))
        j = json.loads(sh([u, "plan", "--gpu", "a100-selene-2021", "--json", *flags.split()]))
        s, V = 2048, 51200
        hw = j["tokens_per_s"] * 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)) / (gpus * 312e12)
        print(f"{name:>8} {gpus:>5} {tp:>2} {pp:>2} {dp:>3} | {pct:>8}% {100 * hw:>7.1f}% {100 * hw / pct:>5.2f} | "
              f"{100 * j['mfu']:>10.1f}% | "
              f"{'yes' if j['fits'] else 'NO ':<4}  {j['memory_total_bytes'] / 2**30:.1f} GiB")
    print("\nLlama 3 405B (Dubey et al. 2024, Table 4) on h100-sxm: rule: micro-batch 1, interleaved x2, no "
          "recompute, ZeRO-1, flash attention, bf16, cp as all-gathers")
    print(f"{'GPUs':>6} {'tp':>2} {'cp':>2} {'pp':>2} {'dp':>3} {'seq':>6} | {'published MFU':>13} {'planner MFU':>11} "
          f"{'ratio':>5} | fits  memory")
    for gpus, tp, cp, pp, dp, seq, per_dp, tflops, mfu in LLAMA3:
        flags = (f"--model llama3-405b --seq {seq} --dp {dp} --tp {tp} --sp --cp {cp} --pp {pp} --pp-schedule "
                 f"interleaved --pp-chunks 2 --zero 1 --batch 1 --grad-accum {per_dp} --recompute none "
                 f"--precision bf16 --attention flash --cp-comm allgather")
        j = json.loads(sh([u, "plan", "--gpu", "h100-sxm", "--json", *flags.split()]))
        print(f"{gpus:>6} {tp:>2} {cp:>2} {pp:>2} {dp:>3} {seq:>6} | {mfu:>12}% {100 * j['mfu']:>10.1f}% "
              f"{100 * j['mfu'] / mfu:>5.2f} | "
              f"{'yes' if j['fits'] else 'NO ':<4}  {j['memory_total_bytes'] / 2**30:.1f} GiB")
    # The search's own pick on Meta's 16K-GPU, 8K-sequence job, against Meta's measured 41%.
    search = json.loads(sh([u, "plan", "--model", "llama3-405b", "--gpu", "h100-sxm", "--gpus", "16384",
                            "--global-batch-tokens", "16777216", "--seq", "8192", "--top", "1", "--json"]))
    best = search["layouts"][0]
    print(f"\nsearch's best on 16384 H100s, seq 8192 ({search['considered']} layouts): "
          f"{best['layout']['describe']}: MFU {100 * best['mfu']:.1f}% = {best['mfu'] / 0.41:.3f}x Meta's 41%, "
          f"{best['time_s']['overlap_slowdown']:.3f} s of compute slowed by hidden transfers")


# The searches timed by --search: the (Llama 3 405B on 16K H100s, 14,922 layouts) and smaller ones.
SEARCHES = [
    ("llama3-405b, 16384 H100s, 16M tokens", "--model llama3-405b --gpu h100-sxm --gpus 16384 "
                                             "--global-batch-tokens 16777216"),
    ("gpt3-1.3b, 64 GPUs, 512 sequences", "--model gpt3-1.3b --gpus 64 --global-batch 512"),
    ("mixtral-8x7b, 32 GPUs, 256 sequences", "--model mixtral-8x7b --gpus 32 --global-batch 256"),
    ("engine small-moe, 8 ranks, 32 sequences", "--preset small-moe --gpus 8 --global-batch 32"),
]


def time_search(u, flags, extra, repeat):
    """The best wall time of `repeat` runs of `ultrascope plan FLAGS --json EXTRA` (the ten best layouts printed: the
    time is the search's), and the output of `--top 0 --json` (every layout, every figure) to compare."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        sh([u, "plan", *flags.split(), "--json", *extra])
        best = min(best, time.perf_counter() - t0)
    return best, sh([u, "plan", *flags.split(), "--top", "0", "--json", *extra])


def search_speed(u, repeat, before_binary):
    """The search's time in its three modes (and another build's), every output the same byte for byte."""
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    model = "?"
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"machine: {model} ({cpu_features()}), {cores} cores (load {load:.1f} at start); the default runs "
          f"{cores} threads; best of {repeat} run(s) each, "
          f"wall seconds of the whole `ultrascope plan ... --json`; 'same output': `--top 0 --json` (every layout) "
          f"byte for byte")
    # (column, binary, extra flags); the speed-ups: the default against each other column
    modes = ([("before-binary", before_binary, [])] if before_binary else []) + [
        ("1 thread, from scratch", u, ["--search-threads", "1", "--search-no-sharing"]),
        ("1 thread, shared work", u, ["--search-threads", "1"]),
        (f"{cores} threads, shared work", u, [])]
    print(f"{'search':<40} {'layouts':>7} | " + " ".join(f"{m:>23}" for m, _, _ in modes)
          + " | speed-up of the last against each | same output")
    for label, flags in SEARCHES:
        runs = [time_search(binary, flags, extra, repeat) for _, binary, extra in modes]
        times, outs = [t for t, _ in runs], [o for _, o in runs]
        n = json.loads(outs[-1])["considered"]
        same = all(o == outs[-1] for o in outs)
        print(f"{label:<40} {n:>7} | " + " ".join(f"{t:>23.2f}" for t in times) + " | "
              + " ".join(f"{t / times[-1]:.1f}x" for t in times[:-1]) + f" | {'yes' if same else 'NO'}", flush=True)
        if not same:
            raise SystemExit(f"bench_planner --search: the outputs of '{label}' differ between the modes")


def sh(cmd, env=None):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--machine", help="an existing machine file (default: run ultrascope calibrate first)")
    ap.add_argument("--published", action="store_true", help="only the table against published large-scale runs")
    ap.add_argument("--search", action="store_true", help="only the search's speed (its modes side by side)")
    ap.add_argument("--repeat", type=int, default=1, help="with --search: runs of each, the best kept")
    ap.add_argument("--before-binary", help="with --search: also time this ultrascope (e.g. a build of main)")
    ap.add_argument("--only", help="only the layouts whose label contains this text (e.g. 'cp', 'pp 2')")
    ap.add_argument("--nodes", type=int, default=0, help="calibrate on and run onto N emulated nodes (root)")
    ap.add_argument("--inter-node-gbps", type=float, default=0, help="with --nodes: the link between them, Gbit/s")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each layout; the best steady step of all of them is compared (a shared machine's "
                         "slow windows only ever stretch a step)")
    a = ap.parse_args()
    node_args = ["--nodes", str(a.nodes)] + (["--inter-node-gbps", f"{a.inter_node_gbps:g}"]
                                              if a.inter_node_gbps > 0 else []) if a.nodes else []
    u = os.path.join(a.build, "bin", "ultrascope")
    if a.published:
        published(u)
        return
    if a.search:
        search_speed(u, a.repeat, a.before_binary)
        return
    layouts = [row for row in LAYOUTS if not a.only or a.only in row[0]]
    if not layouts:
        raise SystemExit(f"bench_planner: no layout's label contains {a.only!r}; the labels are: "
                         + ", ".join(label for label, _, _ in LAYOUTS))
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        machine = a.machine or os.path.join(tmp, "machine.json")
        if not a.machine:
            print(sh([u, "calibrate", "--out", machine, *node_args], env=MPI_ENV).strip())
        m = json.load(open(machine))
        if a.nodes:
            layouts = [row for row in layouts if row[1] <= cores]
            buckets = m.get("inter_node_bucket_bandwidth", m["inter_node"]["bandwidth"])
            slowdown = m.get("inter_node_overlap_slowdown", m["op_costs"]["overlap_slowdown"])
            print(f"{a.nodes} emulated nodes, {m['gpus_per_node']} rank(s) a node in the machine file; inter-node link "
                  f"{m['inter_node']['bandwidth'] / 1e9:.3f} GB/s + {m['inter_node']['latency'] * 1e6:.1f} us per hop "
                  f"for blocking collectives, {buckets / 1e9:.3f} GB/s for gradient buckets, compute beside hidden "
                  f"transfers {100 * slowdown:.0f}% slower (measured)")
        print(f"machine: {cpu_features()}, {cores} cores; GEMM peak {m['gpu']['peak_flops_fp32'] / 1e9:.1f} GFLOP/s "
              f"per rank, link {m['intra_node']['bandwidth'] / 1e9:.2f} GB/s + {m['intra_node']['latency'] * 1e6:.1f} us "
              f"per hop; {a.steps} steps per run, steps 2..{a.steps} measured")
        print(f"{'layout':<26} {'ranks':>5} | {'step pred':>9} {'measured':>9} {'error':>7} | "
              f"{'mem pred':>10} {'measured':>10} {'error':>7}")
        step_errors, mem_errors, routed_errors = [], [], []
        for label, ranks, flags in layouts:
            base = ("--preset small " if "--preset" not in flags else "") + flags
            over = ranks > cores
            nodes = ["--nodes", str((ranks + cores - 1) // cores)] if over else []
            if a.nodes:  # the run's shape, not the machine file's (cores / N): ranks / N a node, block placement
                nodes = ["--nodes", str(a.nodes), "--gpus-per-node", str(max(1, ranks // a.nodes))]
            pred = json.loads(sh([u, "plan", "--cluster", machine, *nodes, "--json", *base.split()]))
            trace = os.path.join(tmp, "run.ustrace")
            measured_step = float("inf")
            for _ in range(max(1, a.runs)):
                sh([u, "run", "-n", str(ranks), "--trace", trace, "--steps", str(a.steps), *node_args, *base.split()],
                   env=MPI_ENV)
                rep = json.loads(sh([u, "report", trace, "--json"]))
                # The best steady step (each step lasting as long as its slowest rank): the machine is shared, and
                # other work stretches some steps; calibrate takes each op's best step too.
                walls = {}
                for r in rep["ranks"]:
                    for st in r["steps"]:
                        if st["step"] >= 2:
                            walls[st["step"]] = max(walls.get(st["step"], 0.0), st["wall_s"])
                measured_step = min(measured_step, min(walls.values()))
            measured_mem = max(r["memory_modelled_sum_peak_bytes"] for r in rep["ranks"])
            mem_cats = ["params", "grads", "master_params", "optimizer_state", "activations", "temporaries"]
            pred_mem = sum(pred["memory_per_gpu_bytes"][c] or 0 for c in mem_cats)
            mem_err = pred_mem / measured_mem - 1
            mem_errors.append(abs(mem_err))
            # Under expert parallelism the planner takes the router's load the run measured (the report's
            # planner.moe_load, from experts.layers[].share): the a-priori (uniform) prediction is shown beside it.
            load = rep.get("planner", {}).get("moe_load", {})
            load_note = ""
            if load.get("kind", "").startswith("measured"):
                uniform_step = pred["step_time_s"]
                pred = json.loads(sh([u, "plan", "--cluster", machine, *nodes, "--json", "--moe-load",
                                      str(load["value"]), *base.split()]))
                load_note = (f"  (router load {load['value']:.3f} measured; assumed uniform: "
                             f"{100 * (uniform_step / measured_step - 1):+.1f}%)")
            step_err = pred["step_time_s"] / measured_step - 1
            if not over:
                step_errors.append(abs(step_err))
            # Under expert parallelism the rows a rank's experts get follow the router, which a planner that has run
            # nothing assumes uniform; the report's walk with the routing measured shows what remains.
            routed = rep.get("planner", {}).get("memory", {}).get("modelled_sum_at_measured_routing_bytes")
            routed_note = ""
            if routed:
                routed_err = routed / rep["planner"]["memory"]["modelled_sum_measured_bytes"] - 1
                routed_errors.append(abs(routed_err))
                routed_note = f"  (with the routing measured: {100 * routed_err:+.2f}%)"
            else:
                routed_errors.append(abs(mem_err))
            print(f"{label:<26} {ranks:>5} | {pred['step_time_s']:>9.4f} {measured_step:>9.4f} "
                  f"{(f'{100 * step_err:+6.1f}%' if not over else '(over)'):>7} | "
                  f"{pred_mem / 2**20:>8.2f}Mi {measured_mem / 2**20:>8.2f}Mi {100 * mem_err:+6.2f}%{routed_note}"
                  f"{load_note}",
                  flush=True)
        print(f"\nstep time: mean absolute error {100 * sum(step_errors) / len(step_errors):.1f}% over "
              f"{len(step_errors)} timing rows (target 5%), worst {100 * max(step_errors):.1f}% (target 10%); "
              f"memory: worst {100 * max(mem_errors):.2f}% over "
              f"{len(mem_errors)} rows (target 2%), {100 * max(routed_errors):.2f}% with the routing measured "
              f"where experts are spread. '(over)': more ranks than cores, time not compared.")


if __name__ == "__main__":
    main()
