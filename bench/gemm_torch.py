#!/usr/bin/env python3
"""PyTorch's torch.nn.functional.linear in f32 and bf16 side by side with `cpdit bench gemm` (a benchmark, not a test).

Times F.linear(x, w, b) on the same (M, K) x (N, K)^T shape with one thread by default (f32 operands, and
bf16 operands as a bf16 diffusers model runs it), runs `cpdit bench gemm` on the same shape and thread
count, and prints one JSON line per cpdit variant with GFLOP/s in wall time (min, median) and in process
CPU time (min) for both, and cpdit's CPU-time ratio over torch in the same precision.

  python3 bench/gemm_torch.py [--shape 1536x3072x3072] [--threads 1] [--repeats 3]
"""
import argparse
import json
import os
import subprocess

import torch

from attention_torch import time_min_median  # this folder's timing rule: warm-up, min, median, CPU time

# Which torch precision each cpdit Linear variant is compared with.
CPDIT_VARIANT_PRECISION = {"linear_f32_bias": "float32", "linear_bf16_weights_bias": "float32",
                           "linear_bf16_amx_bias": "bfloat16", "linear_bf16_onednn_bias": "bfloat16",
                           # GGUF blocks: decoded per tile for the f32 sgemm, or under bf16 decoded to bf16
                           # runs for AMX, or Q8_0 by VNNI int8 dot products
                           "linear_q8_0_decode_bias": "float32", "linear_q4_k_decode_bias": "float32",
                           "linear_q8_0_amx_bias": "bfloat16", "linear_q4_k_amx_bias": "bfloat16",
                           "linear_q8_0_int8_vnni_bias": "bfloat16"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1536x3072x3072", help="MxNxK")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpdit", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "cpdit"))
    args = parser.parse_args()
    m, n, k = (int(v) for v in args.shape.split("x"))
    flops = 2.0 * m * n * k

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    torch_runs = {}
    for name in ("float32", "bfloat16"):
        dtype = getattr(torch, name)
        x, w = torch.rand(m, k, dtype=dtype) * 2 - 1, torch.rand(n, k, dtype=dtype) * 2 - 1
        b = torch.rand(n, dtype=dtype)
        with torch.inference_mode():
            t_min, t_median, cpu = time_min_median(lambda: torch.nn.functional.linear(x, w, b), args.repeats)
        torch_runs[name] = {"gflops_min": flops / t_min / 1e9, "gflops_median": flops / t_median / 1e9,
                            "gflops_cpu_min": flops / cpu / 1e9}

    out = subprocess.run([args.cpdit, "bench", "gemm", "--shape", args.shape, "--threads", str(args.threads),
                          "--repeats", str(args.repeats)], check=True, capture_output=True, text=True).stdout
    for text in out.strip().splitlines():
        line = json.loads(text)
        precision = CPDIT_VARIANT_PRECISION.get(line["op"], "float32")
        ours = {key: line[key] for key in ("gflops_min", "gflops_median", "gflops_cpu_min", "gflops_cpu_median")}
        print(json.dumps({"shape": args.shape, "threads": args.threads, "repeats": args.repeats,
                          "cpdit": line["library"] + ":" + line["op"], "cpdit_gflops": ours,
                          "torch_precision": precision, "torch_linear_gflops": torch_runs[precision],
                          "torch_version": torch.__version__,
                          "ratio_cpdit_over_torch_cpu":
                              ours["gflops_cpu_min"] / torch_runs[precision]["gflops_cpu_min"]}),
              flush=True)


if __name__ == "__main__":
    main()
