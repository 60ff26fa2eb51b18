#!/usr/bin/env python3
"""PyTorch's CPU flash attention (SDPA) side by side with cpdit's flash backend, forward and backward.

For each sequence length, times torch.nn.functional.scaled_dot_product_attention on (B, H, S, D) =
(1, H, S, D) float32, or bfloat16 with --dtype bf16 (PyTorch picks its flash CPU kernel for both): the
forward and the backward alone (autograd.grad on a kept graph), on the same thread count. Then it runs
`cpdit bench attention --backend flash` on the same case and prints one JSON line per case: seconds
(wall min and median, least CPU), GFLOP per CPU second, peak extra memory of each side and the ratio
torch time / cpdit time (> 1: cpdit is faster) on CPU time and on wall time. Forward + backward is
the sum of the two passes on both sides.

  /work/venv/bin/python bench/attention_torch.py --seq 1024 2048 --heads 24        # quick
  /work/venv/bin/python bench/attention_torch.py --seq 4096 8192 --heads 24        # FLUX.1 at 1024x1024 and beyond

--dtype bf16 runs torch's SDPA on bf16 tensors and cpdit's flash backend with --dtype bf16 (bf16 tile
products with f32 accumulation, as `generate --dtype bf16` runs it; cpdit's tensors stay f32):

  /work/venv/bin/python bench/attention_torch.py --seq 1536 --heads 24 --head-dim 128 --dtype bf16 --repeats 5

--kv-seq N gives the keys and values N rows of their own (cross-attention, e.g. LTX-Video's 1536 video
tokens over 128 text tokens: --seq 1536 --kv-seq 128 --heads 32 --head-dim 64).

FLOPs: forward 4 B H S S_kv D, backward 2.5x that (the count cpdit's bench uses). Memory: cpdit reports the
peak of its tracked tensor allocations above what existed before the call; torch's is the growth of the
process's peak resident set over the call (VmHWM after resetting it through /proc/self/clear_refs).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time


def time_min_median(fn, repeats):
    """Wall seconds (min, median) and the least process CPU seconds of one call: the machine this
    runs on is often shared, and CPU time keeps one-thread ratios meaningful there."""
    t = timings(fn, repeats)
    return t["seconds_min"], t["seconds_median"], t["cpu_seconds_min"]


def timings(fn, repeats):
    """One warm-up call, then `repeats` timed calls: wall min/median and CPU min/median seconds."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    wall.sort()
    cpu.sort()
    return {"seconds_min": wall[0], "seconds_median": wall[len(wall) // 2],
            "cpu_seconds_min": cpu[0], "cpu_seconds_median": cpu[len(cpu) // 2]}


def resident_bytes(field):
    with open("/proc/self/status") as status:
        for entry in status:
            if entry.startswith(field + ":"):
                return int(entry.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_extra_bytes(fn):
    """Growth of the peak resident set over one call of fn."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages would otherwise hide new allocations
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current resident set
    before = resident_bytes("VmRSS")
    fn()
    return resident_bytes("VmHWM") - before


def torch_case(torch, seq, kv_seq, heads, head_dim, dtype, repeats):
    sdpa = torch.nn.functional.scaled_dot_product_attention
    gen = torch.Generator().manual_seed(0)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    q, k, v = (torch.randn(1, heads, rows, head_dim, generator=gen).to(dtype).requires_grad_()
               for rows in (seq, kv_seq, kv_seq))
    dout = torch.randn(1, heads, seq, head_dim, generator=gen).to(dtype)
    forward_flops = 4 * heads * seq * kv_seq * head_dim
    out = {}

    def forward():
        with torch.no_grad():
            sdpa(q, k, v)

    graph = {}

    def backward():
        torch.autograd.grad(graph["out"], (q, k, v), dout, retain_graph=True)

    out["fwd"] = {"peak_extra_bytes": peak_extra_bytes(forward), **timings(forward, repeats)}
    graph["out"] = sdpa(q, k, v)
    out["bwd"] = {"peak_extra_bytes": peak_extra_bytes(backward), **timings(backward, repeats)}
    del graph["out"]
    for name, flops in (("fwd", forward_flops), ("bwd", 2.5 * forward_flops)):
        out[name]["gflops_per_cpu_s"] = flops / out[name]["cpu_seconds_min"] / 1e9
    return with_sum(out)


def with_sum(passes):
    """Adds forward + backward as the sum of the two passes' times (both sides are timed apart)."""
    passes["fwd_bwd"] = {key: passes["fwd"][key] + passes["bwd"][key]
                         for key in ("seconds_min", "seconds_median", "cpu_seconds_min")}
    passes["fwd_bwd"]["peak_extra_bytes"] = max(passes["fwd"]["peak_extra_bytes"], passes["bwd"]["peak_extra_bytes"])
    return passes


def cpdit_case(binary, seq, kv_seq, heads, head_dim, dtype, threads, repeats):
    cmd = [binary, "bench", "attention", "--seq", str(seq), "--kv-seq", str(kv_seq), "--heads", str(heads),
           "--head-dim", str(head_dim), "--dtype", dtype, "--threads", str(threads), "--backend", "flash",
           "--repeats", str(repeats)]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    passes = {j["pass"]: j for j in map(json.loads, lines)}
    keep = ("seconds_min", "seconds_median", "cpu_seconds_min", "gflops_per_cpu_s", "peak_extra_bytes")
    return with_sum({name: {key: passes[name][key] for key in keep} for name in ("fwd", "bwd")})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--heads", type=int, default=24)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--kv-seq", type=int, default=0, help="key/value length (default: each --seq)")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                        help="bf16: torch on bf16 tensors, cpdit's flash with --dtype bf16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpdit", default=os.path.join("build", "bin", "cpdit"))
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("attention_torch.py: cannot import torch; run it with a Python that has PyTorch "
                 "(e.g. a venv with torch from PyPI)")
    torch.set_num_threads(args.threads)
    for seq in args.seq:
        kv_seq = args.kv_seq or seq
        theirs = torch_case(torch, seq, kv_seq, args.heads, args.head_dim, args.dtype, args.repeats)
        ours = cpdit_case(args.cpdit, seq, kv_seq, args.heads, args.head_dim, args.dtype, args.threads, args.repeats)
        ratios = {name: {"cpu_min": theirs[name]["cpu_seconds_min"] / ours[name]["cpu_seconds_min"],
                         "wall_min": theirs[name]["seconds_min"] / ours[name]["seconds_min"],
                         "wall_median": theirs[name]["seconds_median"] / ours[name]["seconds_median"],
                         "peak_memory_cpdit_over_torch":
                             ours[name]["peak_extra_bytes"] / max(theirs[name]["peak_extra_bytes"], 1)}
                  for name in ("fwd", "bwd", "fwd_bwd")}
        print(json.dumps({
            "bench": "attention_torch", "B": 1, "H": args.heads, "S": seq, "S_kv": kv_seq, "D": args.head_dim,
            "dtype": args.dtype, "threads": args.threads, "repeats": args.repeats, "torch_version": torch.__version__,
            "load_average": os.getloadavg(), "torch_sdpa": theirs, "cpdit_flash": ours,
            "torch_time_over_cpdit_time": ratios}), flush=True)


if __name__ == "__main__":
    main()
