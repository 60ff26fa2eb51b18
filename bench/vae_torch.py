#!/usr/bin/env python3
"""diffusers' VAE decode side by side with cpdit's (a benchmark, not a test).

Builds diffusers' AutoencoderKL (FLUX.1's config) or AutoencoderKLWan (Wan 2.1's) with random weights,
times `vae.decode(latents)` on the same latent shape and thread count as `cpdit bench vae`, then runs
that command and prints one JSON line per cpdit rank count with both timings and the ratios
torch / cpdit (wall min, and process CPU time: the machine is often shared).

  /work/venv/bin/python bench/vae_torch.py --model flux [--height 1024 --width 1024] [--threads 1]
  /work/venv/bin/python bench/vae_torch.py --model wan [--height 480 --width 832 --frames 17]

PyTorch and diffusers: the project's venv (pip install torch diffusers).
"""
import argparse
import json
import resource
import subprocess
import sys

from attention_torch import time_min_median  # same folder: min/median wall and least CPU seconds


def build(args, torch):
    from diffusers import AutoencoderKL, AutoencoderKLWan
    torch.manual_seed(0)
    if args.model == "flux":
        vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=16,
                            block_out_channels=(128, 256, 512, 512), layers_per_block=2,
                            down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
                            use_quant_conv=False, use_post_quant_conv=False)
        latents = torch.randn(1, 16, args.height // 8, args.width // 8)
    else:
        vae = AutoencoderKLWan()  # Wan 2.1: base_dim 96, z_dim 16
        latents = torch.randn(1, 16, (args.frames - 1) // 4 + 1, args.height // 8, args.width // 8)
    return vae.eval(), latents


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["flux", "wan"], default="flux")
    p.add_argument("--height", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--frames", type=int, default=17)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ranks", default="1,2", help="cpdit rank counts")
    p.add_argument("--split", choices=["rows", "frames"], default="rows", help="how cpdit splits a wan video")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cpdit", default="build/bin/cpdit")
    p.add_argument("--torch-only", action="store_true", help="time diffusers' decode alone")
    args = p.parse_args()
    args.height = args.height or (1024 if args.model == "flux" else 480)
    args.width = args.width or (1024 if args.model == "flux" else 832)

    import torch
    torch.set_num_threads(args.threads)
    vae, latents = build(args, torch)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.no_grad():
        t_min, t_med, t_cpu = time_min_median(lambda: vae.decode(latents), args.repeats)
    # Max RSS growth over the decodes: an upper bound on torch's working memory (KiB on Linux).
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024
    # Printed before cpdit runs: a decode at the real Wan size takes minutes, and a cpdit run that fails
    # (out of memory on a shared machine) must not take torch's numbers with it.
    print(json.dumps({"bench": "vae_torch", "model": args.model, "height": args.height, "width": args.width,
                      "frames": args.frames if args.model == "wan" else 1, "threads": args.threads,
                      "torch": torch.__version__, "torch_min_s": t_min, "torch_median_s": t_med,
                      "torch_cpu_min_s": t_cpu, "torch_max_rss_growth_bytes": rss_growth}), flush=True)
    if args.torch_only:
        return 0
    del vae, latents  # torch's tensors freed before cpdit's decode shares the machine's memory

    command = [args.cpdit, "bench", "vae", "--model", args.model, "--height", str(args.height), "--width",
               str(args.width), "--frames", str(args.frames), "--threads", str(args.threads), "--repeats",
               str(args.repeats), "--split", args.split, "--ranks", *args.ranks.split(",")]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    for text in out.splitlines():
        c = json.loads(text)
        print(json.dumps({
            "bench": "vae_torch", "model": args.model, "height": args.height, "width": args.width,
            "frames": args.frames if args.model == "wan" else 1, "threads_per_rank": args.threads,
            "torch": torch.__version__, "torch_min_s": t_min, "torch_median_s": t_med, "torch_cpu_min_s": t_cpu,
            "torch_max_rss_growth_bytes": rss_growth, "cpdit_ranks": c["ranks"], "cpdit_min_s": c["min_s"],
            "cpdit_median_s": c["median_s"], "cpdit_cpu_min_s": c["cpu_min_s"],
            "cpdit_peak_bytes_per_rank": c["peak_bytes_per_rank"], "cpdit_split": c["split"],
            # Comparable with torch's growth: the cpdit process's peak resident set over its decodes at
            # this rank count (all local ranks: one process) above its resident set before them.
            "cpdit_process_peak_rss_bytes": c["process_peak_rss_bytes"],
            "cpdit_process_rss_growth_bytes": c["process_peak_rss_bytes"] - c["process_rss_before_bytes"],
            "torch_over_cpdit_min": t_min / c["min_s"], "torch_over_cpdit_cpu": t_cpu / c["cpu_min_s"],
            # At one thread per rank: the busiest rank's CPU time, the wall time on idle cores (bench/vae.cpp).
            "cpdit_busiest_rank_cpu_min_s": c.get("busiest_rank_cpu_min_s"),
            "cpdit_first_decode_busiest_rank_cpu_s": c.get("first_decode_busiest_rank_cpu_s"),
            "torch_over_cpdit_busiest_rank_cpu": t_cpu / c["busiest_rank_cpu_min_s"] if "busiest_rank_cpu_min_s" in c else None,
            "cpdit_weight_bytes": c["weight_bytes"], "cpdit_peak_over_1_rank": c.get("peak_over_1_rank"),
            "cpdit_diff_vs_1_rank_over_range": c.get("diff_vs_1_rank_over_range"),
        }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
