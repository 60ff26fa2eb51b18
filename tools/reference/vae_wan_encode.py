#!/usr/bin/env python3
"""Reference numbers for AutoencoderKLWan's encoder, on the vae_wan_tiny fixture's model and on the
qwenimage_pipeline_tiny pipeline's VAE (AutoencoderKLQwenImage, the same architecture).

vae_wan_tiny holds diffusers' decoder numbers only; this adds its encoder: seeded random videos in
[-1, 1] through `vae.encode(video).latent_dist.mode()` (the mean half of quant_conv's output; diffusers
encodes the first frame alone, then 4 frames per chunk, with causal feature caches), float32, one thread:
- `inputs` / `expected`: (1, 3, 9, 32, 48), 9 frames = the first frame and two chunks of 4, so the
  time downsamplers carry frames across chunks -> `latent` (1, 4, 3, 4, 6);
- `image_inputs` / `image_expected`: a batch of two one-frame videos (2, 3, 1, 16, 24) -> (2, 4, 1, 2, 3);
- `qwenimage_inputs` / `qwenimage_expected`: qwenimage_pipeline_tiny's VAE (one spatial downsample, none in
  time) on (1, 3, 5, 12, 16) -> (1, 4, 5, 6, 8).
Every input is stored as `sample`, every output as `latent` (what `cpdit forward` reads and writes).
The script also runs each case in float64 and prints how far float32 lands from it, relative to the
output's range (the tests' tolerance is set from this). Writes tests/data/fixtures/vae_wan_tiny_encode/.

  /work/venv/bin/python tools/reference/vae_wan_encode.py   (torch 2.15.0, diffusers 0.42.1)
"""
import copy
import json
import os
import sys

import torch
from diffusers import AutoencoderKLQwenImage, AutoencoderKLWan
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "fixtures")


def load(cls, folder, weights):
    with open(os.path.join(folder, "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    vae = cls(**config)
    vae.load_state_dict(load_file(os.path.join(folder, weights)))
    return vae.eval()


def video(shape, seed):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def encode(vae, sample):
    with torch.no_grad():
        latent = vae.encode(sample).latent_dist.mode()
        exact = copy.deepcopy(vae).double().encode(sample.double()).latent_dist.mode()
    spread = float(exact.max() - exact.min())
    print(tuple(sample.shape), "->", tuple(latent.shape), "range", spread,
          "float32 vs float64 / range", float((latent.double() - exact).abs().max()) / spread)
    return latent


def main():
    torch.set_num_threads(1)
    wan = load(AutoencoderKLWan, os.path.join(ROOT, "vae_wan_tiny"), "weights.safetensors")
    qwen = load(AutoencoderKLQwenImage, os.path.join(ROOT, "qwenimage_pipeline_tiny", "pipeline", "vae"),
                "diffusion_pytorch_model.safetensors")
    cases = {
        "": (wan, video((1, 3, 9, 32, 48), 17)),
        "image_": (wan, video((2, 3, 1, 16, 24), 18)),
        "qwenimage_": (qwen, video((1, 3, 5, 12, 16), 19)),
    }
    out = os.path.join(ROOT, "vae_wan_tiny_encode")
    os.makedirs(out, exist_ok=True)
    meta = {"diffusers": __import__("diffusers").__version__, "torch": torch.__version__}
    for prefix, (vae, sample) in cases.items():
        latent = encode(vae, sample)
        save_file({"sample": sample.contiguous()}, os.path.join(out, prefix + "inputs.safetensors"), metadata=meta)
        save_file({"latent": latent.contiguous()}, os.path.join(out, prefix + "expected.safetensors"), metadata=meta)


if __name__ == "__main__":
    sys.exit(main())
