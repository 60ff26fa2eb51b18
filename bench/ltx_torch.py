#!/usr/bin/env python3
"""diffusers' LTX-Video block side by side with cpdit's (a benchmark, not a test).

Builds diffusers' LTXVideoTransformerBlock at the 2B widths (2048 = 32 heads x 64, FFN 8192, q/k
RMSNorm across heads) with random weights, times one forward on a 768x512 25-frame video (latent
4 x 16 x 24 = 1536 tokens; --tokens 384 for 4 x 8 x 12) with 128 T5 tokens of which the last 28
are padding (diffusers' -10000 bias), the RoPE tables of LTXVideoRotaryPosEmbed and a per-batch
modulation, on --threads PyTorch threads, in --dtype (f32, or bf16 weights and activations as the
released checkpoints ship). Then runs `cpdit bench model --model ltx --dtype` on the same shape (1 rank, and 2 ranks of one thread each: Ulysses, ring) and prints one JSON line per cpdit
layout with both timings and the ratios torch / cpdit (wall min, and CPU time: the machine is
often shared, and CPU time is the steadier figure there; for 2 ranks cpdit's CPU time is rank 0's
process CPU time shared out over the ranks, i.e. the per-rank time the 2 ranks run in parallel).

  /work/venv/bin/python bench/ltx_torch.py [--tokens 1536] [--dtype f32|bf16] [--threads 1] [--repeats 3]

PyTorch and diffusers: the project's venv (pip install torch diffusers).
"""
import argparse
import json
import subprocess
import sys

from attention_torch import time_min_median  # same folder: min/median wall and least CPU seconds

DIM, HEADS, HEAD_DIM, TEXT, REAL_TEXT = 2048, 32, 64, 128, 100
GRIDS = {1536: (4, 16, 24), 384: (4, 8, 12)}


def build(torch, tokens, dtype):
    from diffusers.models.transformers.transformer_ltx import LTXVideoRotaryPosEmbed, LTXVideoTransformerBlock
    torch.manual_seed(0)
    block = LTXVideoTransformerBlock(dim=DIM, num_attention_heads=HEADS, attention_head_dim=HEAD_DIM,
                                     cross_attention_dim=DIM, qk_norm="rms_norm_across_heads",
                                     activation_fn="gelu-approximate", attention_bias=True,
                                     attention_out_bias=True, eps=1e-6, elementwise_affine=False)
    block = block.to(dtype).eval()
    frames, height, width = GRIDS[tokens]
    hidden = torch.randn(1, tokens, DIM, dtype=dtype)
    rope = LTXVideoRotaryPosEmbed(dim=DIM)(hidden, frames, height, width, (8 / 24, 32.0, 32.0))
    text = torch.randn(1, TEXT, DIM, dtype=dtype)
    keep = torch.zeros(1, TEXT)
    keep[:, :REAL_TEXT] = 1
    bias = ((1 - keep) * -10000.0).unsqueeze(1).to(dtype)  # as LTXVideoTransformer3DModel.forward makes it
    temb = 0.1 * torch.randn(1, 1, 6 * DIM, dtype=dtype)
    return lambda: block(hidden_states=hidden, encoder_hidden_states=text, temb=temb, image_rotary_emb=rope,
                         encoder_attention_mask=bias)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, choices=sorted(GRIDS), default=1536)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cpdit", default="build/bin/cpdit")
    args = p.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    forward = build(torch, args.tokens, torch.float32 if args.dtype == "f32" else torch.bfloat16)
    with torch.no_grad():
        t_min, t_med, t_cpu = time_min_median(forward, args.repeats)

    command = [args.cpdit, "bench", "model", "--model", "ltx", "--image-tokens", str(args.tokens), "--dtype",
               args.dtype, "--repeats", str(args.repeats)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    for text in out.splitlines():
        c = json.loads(text)
        print(json.dumps({
            "bench": "ltx_torch", "block": c["block"], "dtype": args.dtype, "video_tokens": args.tokens, "text_tokens": TEXT,
            "torch": torch.__version__, "torch_threads": args.threads, "torch_min_s": t_min,
            "torch_median_s": t_med, "torch_cpu_min_s": t_cpu, "cpdit_layout": c["layout"],
            "cpdit_ranks": c["ranks"], "cpdit_min_s": c["min_s"], "cpdit_median_s": c["median_s"],
            "cpdit_cpu_s_per_rank": c["cpu_s_per_rank"], "cpdit_cpu_speedup_vs_1_rank": c["cpu_speedup_vs_1_rank"],
            "torch_over_cpdit_min": t_min / c["min_s"], "torch_over_cpdit_cpu": t_cpu / c["cpu_s_per_rank"],
        }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
