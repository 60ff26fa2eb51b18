#!/usr/bin/env python3
"""Reference numbers for AutoencoderKL's encoder, on the vae_kl_tiny fixture's model.

vae_kl_tiny holds diffusers' decoder numbers only; this adds its encoder: a seeded random image
(1, 3, 16, 12) through `vae.encode(image).latent_dist.parameters` (the encoder's output, mean then
log-variance channels; no quant_conv in this config), float32, one thread. Writes
tests/data/fixtures/vae_kl_tiny_encode/{inputs,expected}.safetensors.

  /work/venv/bin/python tools/reference/vae_kl_encode.py   (torch 2.15.0, diffusers 0.42.1)
"""
import json
import os
import sys

import torch
from diffusers import AutoencoderKL
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "fixtures")


def main():
    torch.set_num_threads(1)
    source = os.path.join(ROOT, "vae_kl_tiny")
    with open(os.path.join(source, "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    vae = AutoencoderKL(**config)
    vae.load_state_dict(load_file(os.path.join(source, "weights.safetensors")))
    vae.eval()
    image = torch.rand(1, 3, 16, 12, generator=torch.Generator().manual_seed(13)) * 2 - 1
    with torch.no_grad():
        moments = vae.encode(image).latent_dist.parameters
    out = os.path.join(ROOT, "vae_kl_tiny_encode")
    os.makedirs(out, exist_ok=True)
    meta = {"diffusers": __import__("diffusers").__version__, "torch": torch.__version__}
    save_file({"sample": image.contiguous()}, os.path.join(out, "inputs.safetensors"), metadata=meta)
    save_file({"moments": moments.contiguous()}, os.path.join(out, "expected.safetensors"), metadata=meta)
    print("moments", tuple(moments.shape), "range", float(moments.min()), float(moments.max()))


if __name__ == "__main__":
    sys.exit(main())
