#!/usr/bin/env python3
"""PyTorch CPU attention side by side with cpdit's (a benchmark, not a test).

For each sequence length, runs torch scaled_dot_product_attention (when this PyTorch has it) and a
manual softmax(q k^T * scale) v on (B, H, S, D) = (1, H, S, 128) float32 with the same thread count,
then runs `cpdit bench attention` for the same case and prints one JSON line per case with both
GFLOP/s (forward FLOPs = 4 B H S^2 D) and the ratio cpdit / torch. With --backward, SDPA's backward too
(autograd on one retained forward graph, FLOPs counted as cpdit counts them: 2.5x the forward), beside
cpdit's flash backward, with each side's peak memory growth. --no-manual skips the materialised
softmax (S x S scores per head: 6 GiB at H = 24, S = 8192).

  python3 bench/attention_torch.py [--seq 4096] [--heads 4] [--threads 1] [--backward] [--no-manual]

PyTorch: Debian's python3-torch (apt-get install python3-torch), so run it with /usr/bin/python3.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time


def load_torch():
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:
        print("attention_torch.py: cannot import torch; install Debian's PyTorch with "
              "`apt-get install python3-torch` and run this script with the system Python (/usr/bin/python3 "
              "bench/attention_torch.py)", file=sys.stderr)
        sys.exit(2)


def time_min_median(fn, repeats):
    """Wall seconds (min, median) and the least process CPU seconds of one call: the machine this
    runs on is often shared, and CPU time keeps one-thread ratios meaningful there."""
    fn()  # warm-up
    samples, cpu = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        fn()
        samples.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    samples.sort()
    return samples[0], samples[len(samples) // 2], min(cpu)


def peak_growth(fn, repeats):
    """time_min_median of fn, and the growth of the process's peak RSS while it ran (bytes)."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t_min, t_median, t_cpu = time_min_median(fn, repeats)
    return t_min, t_median, t_cpu, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024


def torch_cases(torch, seq, heads, head_dim, repeats, manual_too, backward):
    q, k, v = (torch.randn(1, heads, seq, head_dim) for _ in range(3))
    scale = head_dim ** -0.5

    def manual():
        p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, dim=-1)
        return torch.matmul(p, v)

    cases = {"manual_softmax": manual} if manual_too else {}
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:  # PyTorch >= 2.0
        cases["sdpa"] = lambda: sdpa(q, k, v)
    a, b = torch.randn(4096, head_dim), torch.randn(head_dim, 4096)
    gemm_min, _, gemm_cpu = time_min_median(lambda: torch.matmul(a, b), repeats)
    gemm_flops = 2 * 4096 * 4096 * head_dim
    out = {"torch_sgemm_gflops": gemm_flops / gemm_min / 1e9,
           "torch_sgemm_gflops_per_cpu_s": gemm_flops / gemm_cpu / 1e9}
    flops = 4 * heads * seq * seq * head_dim

    def record(name, timing, pass_flops):
        t_min, t_median, t_cpu, growth = timing
        out[name] = {"seconds_min": t_min, "seconds_median": t_median, "cpu_seconds_min": t_cpu,
                     "gflops": pass_flops / t_min / 1e9, "gflops_per_cpu_s": pass_flops / t_cpu / 1e9,
                     "peak_rss_growth_bytes": growth}

    with torch.no_grad():
        for name, fn in cases.items():
            record(name, peak_growth(fn, repeats), flops)
    if backward and sdpa is not None:
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        result = sdpa(qg, kg, vg)
        dout = torch.randn_like(result)
        record("sdpa_backward", peak_growth(
            lambda: torch.autograd.grad(result, (qg, kg, vg), dout, retain_graph=True), repeats), 2.5 * flops)
    return out


def cpdit_case(binary, seq, heads, head_dim, threads, repeats):
    cmd = [binary, "bench", "attention", "--seq", str(seq), "--heads", str(heads), "--head-dim",
           str(head_dim), "--threads", str(threads), "--backend", "flash", "--repeats", str(repeats)]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    return {j["pass"]: j for j in map(json.loads, lines)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, nargs="+", default=[4096])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backward", action="store_true", help="also SDPA's backward beside cpdit's")
    parser.add_argument("--no-manual", action="store_true", help="skip the materialised softmax")
    parser.add_argument("--cpdit", default=os.path.join("build", "bin", "cpdit"))
    args = parser.parse_args()
    torch = load_torch()
    torch.set_num_threads(args.threads)
    for seq in args.seq:
        theirs = torch_cases(torch, seq, args.heads, args.head_dim, args.repeats, not args.no_manual, args.backward)
        ours = cpdit_case(args.cpdit, seq, args.heads, args.head_dim, args.threads, args.repeats)
        attention_runs = [v for name, v in theirs.items() if isinstance(v, dict) and name != "sdpa_backward"]
        best_torch = max(v["gflops"] for v in attention_runs)
        best_torch_cpu = max(v["gflops_per_cpu_s"] for v in attention_runs)
        print(json.dumps({
            "bench": "attention_torch", "S": seq, "H": args.heads, "D": args.head_dim, "B": 1,
            "threads": args.threads, "torch_version": torch.__version__,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset"),
            "torch": theirs, "cpdit_flash_fwd_gflops": ours["fwd"]["gflops"],
            "cpdit_flash_fwd_gflops_per_cpu_s": ours["fwd"]["gflops_per_cpu_s"],
            "cpdit_flash_fwd_peak_extra_bytes": ours["fwd"]["peak_extra_bytes"],
            "cpdit_sgemm_gflops": ours["fwd"]["sgemm_gflops"],
            "ratio_cpdit_over_best_torch": ours["fwd"]["gflops"] / best_torch,
            "ratio_cpdit_over_best_torch_cpu": ours["fwd"]["gflops_per_cpu_s"] / best_torch_cpu,
            **({"cpdit_flash_bwd_gflops": ours["bwd"]["gflops"],
                "cpdit_flash_bwd_gflops_per_cpu_s": ours["bwd"]["gflops_per_cpu_s"],
                "cpdit_flash_bwd_peak_extra_bytes": ours["bwd"]["peak_extra_bytes"],
                "ratio_cpdit_bwd_over_sdpa_bwd_cpu":
                    ours["bwd"]["gflops_per_cpu_s"] / theirs["sdpa_backward"]["gflops_per_cpu_s"]}
               if "sdpa_backward" in theirs else {})}),
              flush=True)


if __name__ == "__main__":
    main()
