#!/usr/bin/env python3
"""Reference numbers for LTXVideoTransformer3DModel with per-token timesteps and padded text.

ltx_tiny calls the model with one timestep and a text mask that keeps every token; this adds, on the
same model (ltx_tiny's config and weights), the two cases the LTX pipelines also produce: a
timestep per latent token (B, S), as LTXConditionPipeline passes it, and padded T5 text. Three batch
items over a 3 x 3 x 4 latent grid (36 tokens) and 7 text tokens: item 0 keeps all its text, item 1
keeps the first 3 tokens, item 2 keeps none (diffusers' -10000 bias then moves every logit alike,
so all the text is attended). Per-token timesteps are seeded uniform draws in [0, 1000).
`sample` is the float32 run (one thread); `sample_float64` the same model and inputs in float64
(stored as float32): in float32, -10000 + logit keeps only ~1e-3 of each logit of item 2, so its
float32 sample is 9e-5 of the range off the exact one, while items 0 and 1 agree to 3e-7.
Writes tests/data/fixtures/ltx_video_per_token/{inputs,expected}.safetensors.

  /work/venv/bin/python tools/reference/ltx_video_per_token.py   (torch 2.15.0, diffusers 0.42.1)
"""
import json
import os
import sys

import torch
from diffusers import LTXVideoTransformer3DModel
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "fixtures")


def main():
    torch.set_num_threads(1)
    source = os.path.join(ROOT, "ltx_tiny")
    with open(os.path.join(source, "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    model = LTXVideoTransformer3DModel(**config)
    model.load_state_dict(load_file(os.path.join(source, "weights.safetensors")))
    model.eval()

    g = torch.Generator().manual_seed(29)
    batch, frames, height, width, text = 3, 3, 3, 4, 7
    tokens = frames * height * width
    hidden = torch.randn(batch, tokens, config["in_channels"], generator=g)
    encoder = torch.randn(batch, text, config["caption_channels"], generator=g)
    timestep = torch.rand(batch, tokens, generator=g) * 1000
    mask = torch.zeros(batch, text, dtype=torch.bool)
    mask[0, :] = True
    mask[1, :3] = True
    scale = (8 / 24, 32.0, 32.0)
    with torch.no_grad():
        sample = model(hidden_states=hidden, encoder_hidden_states=encoder, timestep=timestep,
                       encoder_attention_mask=mask, num_frames=frames, height=height, width=width,
                       rope_interpolation_scale=scale, return_dict=False)[0]
        exact = model.double()(hidden_states=hidden.double(), encoder_hidden_states=encoder.double(),
                               timestep=timestep.double(), encoder_attention_mask=mask, num_frames=frames,
                               height=height, width=width, rope_interpolation_scale=scale, return_dict=False)[0]
    out = os.path.join(ROOT, "ltx_video_per_token")
    os.makedirs(out, exist_ok=True)
    meta = {"diffusers": __import__("diffusers").__version__, "torch": torch.__version__}
    inputs = {"hidden_states": hidden, "encoder_hidden_states": encoder, "timestep": timestep,
              "encoder_attention_mask": mask, "num_frames": torch.tensor([frames]), "height": torch.tensor([height]),
              "width": torch.tensor([width]), "rope_interpolation_scale": torch.tensor(scale, dtype=torch.float64)}
    save_file({k: v.contiguous() for k, v in inputs.items()}, os.path.join(out, "inputs.safetensors"), metadata=meta)
    save_file({"sample": sample.contiguous(), "sample_float64": exact.float().contiguous()},
              os.path.join(out, "expected.safetensors"), metadata=meta)
    print("sample", tuple(sample.shape), "range", float(sample.min()), float(sample.max()))
    for b in range(batch):
        print("item", b, "float32 vs float64, relative to the range:",
              float((sample[b].double() - exact[b]).abs().max() / exact.abs().max()))


if __name__ == "__main__":
    sys.exit(main())
