#!/usr/bin/env python3
"""diffusers' FLUX.1 and Wan 2.1 transformer blocks side by side with `cpdit bench model` (a benchmark, not a test).

--model flux: FluxTransformerBlock and FluxSingleTransformerBlock at FLUX.1 widths (3072 hidden, 24 heads
of 128) on --image-tokens image + 512 text tokens (default 1024). --model wan: WanTransformerBlock of Wan 2.1
T2V-1.3B (1536 hidden, 12 heads of 128, FFN 8960) on --image-tokens video tokens (1950 = 5 x 15 x 26, or
7800 = 5 x 30 x 52) attending to 512 text tokens. Random weights in --dtype (diffusers in bf16 for
cpdit's q8_0 / q4_k, whose lines are preceded by each block's error against f32); times one forward of each
block with --threads threads (min and median wall time of --repeats runs after a warm-up, and the least
process CPU time), then runs `cpdit bench model --model M --dtype` on the same shape (its single-rank
lines) and prints one JSON line per block with both, cpdit's ratio over diffusers in CPU time, and
cpdit's 2-rank (Ulysses) CPU-time speedup over 1 rank from the same run.

  python3 bench/model_torch.py [--model flux|wan] [--dtype bf16] [--image-tokens N] [--threads 1] [--repeats 3]
"""
import argparse
import json
import os
import subprocess

import torch
from diffusers.models.transformers.transformer_flux import (FluxPosEmbed, FluxSingleTransformerBlock,
                                                             FluxTransformerBlock)
from diffusers.models.transformers.transformer_wan import WanRotaryPosEmbed, WanTransformerBlock

from attention_torch import time_min_median  # this folder's timing rule: warm-up, min, median, CPU time

DIM, HEADS, HEAD_DIM, TEXT = 3072, 24, 128, 512
WAN_DIM, WAN_HEADS, WAN_FFN = 1536, 12, 8960
WAN_GRIDS = {1950: (5, 15, 26), 7800: (5, 30, 52)}  # video tokens -> (frames, rows, columns) of patches


def block_gflop(tokens):
    """As `cpdit bench model` counts it: 24 D^2 per token in the projections, 4 S^2 D in attention."""
    return (24.0 * DIM * DIM * tokens + 4.0 * tokens * tokens * DIM) / 1e9


def wan_block_gflop(s):
    """As `cpdit bench model --model wan` counts it: video-token projections (self q k v o, cross q o,
    FFN), the text keys and values, and the two attentions."""
    d = WAN_DIM
    return (2.0 * s * (6 * d * d + 2 * d * WAN_FFN) + 2.0 * TEXT * 2 * d * d + 4.0 * s * s * d
            + 4.0 * s * TEXT * d) / 1e9


def flux_cases(image, dtype):
    """(name, block, call, gflop) of FLUX.1's double and single blocks on image + text tokens."""
    side = int(round(image ** 0.5))
    ids = torch.zeros(TEXT + image, 3)
    ids[TEXT:, 1] = torch.arange(image) // side
    ids[TEXT:, 2] = torch.arange(image) % side
    rope = FluxPosEmbed(theta=10000, axes_dim=[16, 56, 56])(ids)
    x, c = torch.randn(1, image, DIM, dtype=dtype), torch.randn(1, TEXT, DIM, dtype=dtype)
    temb = torch.randn(1, DIM, dtype=dtype)
    gflop = block_gflop(image + TEXT)
    return [("double", FluxTransformerBlock(DIM, HEADS, HEAD_DIM),
             lambda b: b(x, c, temb, image_rotary_emb=rope), gflop),
            ("single", FluxSingleTransformerBlock(DIM, HEADS, HEAD_DIM),
             lambda b: b(x, c, temb, image_rotary_emb=rope), gflop)]


def wan_cases(tokens, dtype):
    """(name, block, call, gflop) of Wan 2.1 1.3B's block on a latent of `tokens` patches."""
    frames, rows, cols = WAN_GRIDS[tokens]
    latent = torch.zeros(1, 16, frames, rows * 2, cols * 2)
    rope = WanRotaryPosEmbed(HEAD_DIM, (1, 2, 2), 1024)(latent)
    x, text = torch.randn(1, tokens, WAN_DIM, dtype=dtype), torch.randn(1, TEXT, WAN_DIM, dtype=dtype)
    temb = 0.1 * torch.randn(1, 6, WAN_DIM, dtype=dtype)
    block = WanTransformerBlock(WAN_DIM, WAN_FFN, WAN_HEADS, cross_attn_norm=True, eps=1e-6)
    return [("wan2.1-1.3b", block, lambda b: b(x, text, temb, rope), wan_block_gflop(tokens))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["flux", "wan"], default="flux")
    # q8_0 / q4_k: cpdit's blocks on GGUF-encoded weights, beside diffusers' bf16 blocks
    parser.add_argument("--dtype", choices=["f32", "bf16", "q8_0", "q4_k"], default="bf16")
    parser.add_argument("--image-tokens", type=int, help="default 1024 (flux), 1950 (wan)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpdit", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "cpdit"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = torch.float32 if args.dtype == "f32" else torch.bfloat16
    image = args.image_tokens or (1024 if args.model == "flux" else 1950)
    cases = flux_cases(image, dtype) if args.model == "flux" else wan_cases(image, dtype)
    torch_runs = {}
    with torch.inference_mode():
        for kind, block, call, gflop in cases:
            block = block.to(dtype).eval()
            t_min, t_median, cpu = time_min_median(lambda: call(block), args.repeats)
            torch_runs[kind] = {"min_s": t_min, "median_s": t_median, "cpu_s": cpu, "gflops_per_cpu_s": gflop / cpu}

    out = subprocess.run([args.cpdit, "bench", "model", "--model", args.model, "--quick", "--dtype", args.dtype,
                          "--image-tokens", str(image), "--repeats", str(args.repeats)],
                         check=True, capture_output=True, text=True).stdout
    lines = [json.loads(text) for text in out.strip().splitlines()]
    for line in lines:  # each block's error against the f32 block, as cpdit measured it
        if line["bench"] == "model_accuracy":
            print(json.dumps(line), flush=True)
    lines = [line for line in lines if line["bench"] == "model"]
    # The 2-rank (Ulysses) line of the same run: its CPU-time speedup over 1 rank rides along.
    two_ranks = {line["block"]: line["cpu_speedup_vs_1_rank"] for line in lines if line["ranks"] == 2}
    for line in lines:
        if line["ranks"] != 1:
            continue
        theirs = torch_runs[line["block"]]
        print(json.dumps({"model": args.model, "block": line["block"], "dtype": args.dtype,
                          "diffusers_dtype": str(dtype).removeprefix("torch."), "tokens": image, "text_tokens": TEXT,
                          "threads": args.threads, "repeats": args.repeats, "torch_version": torch.__version__,
                          "cpdit_min_s": line["min_s"], "cpdit_median_s": line["median_s"],
                          "cpdit_cpu_s": line["cpu_s_per_rank"], "cpdit_gflops_per_cpu_s": line["gflops_per_cpu_s"],
                          "diffusers_min_s": theirs["min_s"], "diffusers_median_s": theirs["median_s"],
                          "diffusers_cpu_s": theirs["cpu_s"], "diffusers_gflops_per_cpu_s": theirs["gflops_per_cpu_s"],
                          "ratio_cpdit_over_diffusers_cpu": theirs["cpu_s"] / line["cpu_s_per_rank"],
                          "cpdit_2_ranks_cpu_speedup": two_ranks.get(line["block"])}), flush=True)


if __name__ == "__main__":
    main()
