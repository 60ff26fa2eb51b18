#!/usr/bin/env python3
"""diffusers' QwenImageTransformerBlock side by side with cpdit's (a benchmark, not a test).

Builds one diffusers QwenImageTransformerBlock at the released widths (3072 = 24 heads x 128) with
PyTorch's default random weights, times its forward on one square image of N tokens and 256 text tokens
(no mask; RoPE from diffusers' QwenEmbedRope) at one thread, then runs `cpdit bench model --model
qwenimage` on the same shape (1 rank; 2 ranks Ulysses and ring, one thread each) and prints one JSON
line per cpdit layout with both timings and the ratios torch / cpdit, by wall min and by CPU time
(cpdit's CPU seconds per rank: the machine is often shared).

  /work/venv/bin/python bench/qwenimage_block_torch.py [--image-tokens 4096] [--repeats 3]

PyTorch and diffusers: the project's venv.
"""
import argparse
import json
import subprocess
import sys

from attention_torch import time_min_median  # same folder: min/median wall and least CPU seconds

DIM, HEADS, HEAD_DIM, TEXT = 3072, 24, 128, 256


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image-tokens", type=int, default=4096, help="a square count: 4096 is 1024x1024 pixels")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cpdit", default="build/bin/cpdit")
    p.add_argument("--quick", action="store_true", help="cpdit without the ring layout")
    args = p.parse_args()
    side = round(args.image_tokens ** 0.5)
    assert side * side == args.image_tokens, "a square token count"

    import torch
    from diffusers.models.transformers.transformer_qwenimage import QwenEmbedRope, QwenImageTransformerBlock
    torch.set_num_threads(1)
    torch.manual_seed(0)
    block = QwenImageTransformerBlock(dim=DIM, num_attention_heads=HEADS, attention_head_dim=HEAD_DIM).eval()
    rope = QwenEmbedRope(theta=10000, axes_dim=[16, 56, 56], scale_rope=True)
    x = torch.randn(1, args.image_tokens, DIM)
    c = torch.randn(1, TEXT, DIM)
    temb = torch.randn(1, DIM)
    with torch.no_grad():
        freqs = rope([[(1, side, side)]], max_txt_seq_len=TEXT, device=torch.device("cpu"))
        t_min, t_med, t_cpu = time_min_median(
            lambda: block(hidden_states=x, encoder_hidden_states=c, encoder_hidden_states_mask=None, temb=temb,
                          image_rotary_emb=freqs), args.repeats)
    del block

    command = [args.cpdit, "bench", "model", "--model", "qwenimage", "--image-tokens", str(args.image_tokens),
               "--repeats", str(args.repeats)] + (["--quick"] if args.quick else [])
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    for text in out.splitlines():
        c_line = json.loads(text)
        print(json.dumps({
            "bench": "qwenimage_block_torch", "image_tokens": args.image_tokens, "text_tokens": TEXT,
            "torch": torch.__version__, "torch_threads": 1, "torch_min_s": t_min, "torch_median_s": t_med,
            "torch_cpu_min_s": t_cpu, "cpdit_layout": c_line["layout"], "cpdit_ranks": c_line["ranks"],
            "cpdit_min_s": c_line["min_s"], "cpdit_median_s": c_line["median_s"],
            "cpdit_cpu_s_per_rank": c_line["cpu_s_per_rank"], "gflop": c_line["gflop"],
            "torch_over_cpdit_min": t_min / c_line["min_s"],
            "torch_over_cpdit_cpu": t_cpu / c_line["cpu_s_per_rank"],
        }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
