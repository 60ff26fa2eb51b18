#!/usr/bin/env python3
"""diffusers' FLUX.1 double and single transformer blocks side by side with `cpdit bench model` (a benchmark, not a test).

Builds FluxTransformerBlock and FluxSingleTransformerBlock at FLUX.1 widths (3072 hidden, 24 heads of 128)
with random weights in --dtype, times one forward of each on --image-tokens image + 512 text tokens with
--threads threads (min and median wall time of --repeats runs after a warm-up, and the least process CPU
time), then runs `cpdit bench model --model flux --dtype` on the same shape (its single-rank lines) and
prints one JSON line per block with both and cpdit's ratio over diffusers in CPU time.

  python3 bench/model_torch.py [--dtype bf16] [--image-tokens 1024] [--threads 1] [--repeats 3]
"""
import argparse
import json
import os
import subprocess

import torch
from diffusers.models.transformers.transformer_flux import (FluxPosEmbed, FluxSingleTransformerBlock,
                                                             FluxTransformerBlock)

from attention_torch import time_min_median  # this folder's timing rule: warm-up, min, median, CPU time

DIM, HEADS, HEAD_DIM, TEXT = 3072, 24, 128, 512


def block_gflop(tokens):
    """As `cpdit bench model` counts it: 24 D^2 per token in the projections, 4 S^2 D in attention."""
    return (24.0 * DIM * DIM * tokens + 4.0 * tokens * tokens * DIM) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="bf16")
    parser.add_argument("--image-tokens", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpdit", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "cpdit"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    image = args.image_tokens
    side = int(round(image ** 0.5))
    ids = torch.zeros(TEXT + image, 3)
    ids[TEXT:, 1] = torch.arange(image) // side
    ids[TEXT:, 2] = torch.arange(image) % side
    rope = FluxPosEmbed(theta=10000, axes_dim=[16, 56, 56])(ids)
    x, c = torch.randn(1, image, DIM, dtype=dtype), torch.randn(1, TEXT, DIM, dtype=dtype)
    temb = torch.randn(1, DIM, dtype=dtype)
    blocks = {"double": FluxTransformerBlock(DIM, HEADS, HEAD_DIM), "single": FluxSingleTransformerBlock(DIM, HEADS, HEAD_DIM)}
    torch_runs = {}
    with torch.inference_mode():
        for kind, block in blocks.items():
            block = block.to(dtype).eval()
            t_min, t_median, cpu = time_min_median(lambda: block(x, c, temb, image_rotary_emb=rope), args.repeats)
            torch_runs[kind] = {"min_s": t_min, "median_s": t_median, "cpu_s": cpu,
                                "gflops_per_cpu_s": block_gflop(image + TEXT) / cpu}

    out = subprocess.run([args.cpdit, "bench", "model", "--model", "flux", "--quick", "--dtype", args.dtype,
                          "--image-tokens", str(image), "--repeats", str(args.repeats)],
                         check=True, capture_output=True, text=True).stdout
    for text in out.strip().splitlines():
        line = json.loads(text)
        if line["ranks"] != 1:
            continue
        theirs = torch_runs[line["block"]]
        print(json.dumps({"block": line["block"], "dtype": args.dtype, "image_tokens": image, "text_tokens": TEXT,
                          "threads": args.threads, "repeats": args.repeats, "torch_version": torch.__version__,
                          "cpdit_min_s": line["min_s"], "cpdit_median_s": line["median_s"],
                          "cpdit_cpu_s": line["rank0_cpu_s"], "cpdit_gflops_per_cpu_s": line["gflops_per_cpu_s"],
                          "diffusers_min_s": theirs["min_s"], "diffusers_median_s": theirs["median_s"],
                          "diffusers_cpu_s": theirs["cpu_s"], "diffusers_gflops_per_cpu_s": theirs["gflops_per_cpu_s"],
                          "ratio_cpdit_over_diffusers_cpu": theirs["cpu_s"] / line["rank0_cpu_s"]}), flush=True)


if __name__ == "__main__":
    main()
