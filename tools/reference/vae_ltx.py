#!/usr/bin/env python3
"""Reference numbers for AutoencoderKLLTXVideo's decoder: two tiny random models.

  plain/     the LTX-Video 0.9.0 layout: no timestep conditioning, non-causal decoder (replicate
             time padding on both sides), one up block that changes channels (LayerNorm + 1x1x1
             conv shortcut); latents (1, 8, 2, 3, 4) -> sample (1, 3, 5, 24, 32).
  timestep/  the 0.9.1+ layout (0.9.5's shape): timestep_conditioning, upsample_residual and
             upsample_factor 2 in every up block, decoder_causal true (the flag's other branch);
             latents (1, 8, 2, 3, 4) -> sample (1, 3, 9, 48, 64).

Each folder: config.json, weights.safetensors (with the latents_mean/latents_std buffers),
inputs.safetensors (`latents`, and `timestep` (1,) for the conditioned one: the pipeline's
decode_timestep, which the decoder multiplies by timestep_scale_multiplier), expected.safetensors
(`sample` = vae.decode(latents, temb=timestep).sample), pipeline.safetensors (`normalized` latents,
`noise` for the conditioned one, and `prepared`: what LTXPipeline decodes, denormalised with the
buffers and scaling_factor and mixed with the noise at decode_noise_scale 0.025) and intermediates.safetensors
(forward-hook outputs of decoder.conv_in, decoder.mid_block, decoder.up_blocks.N, decoder.conv_out).
Parameters are re-initialised from torch.Generator().manual_seed(seed) in named_parameters() order
as the shared fixtures are: ".weight" tensors of >= 2 dims randn/sqrt(fan_in), other >= 2-D params
0.1*randn, 1-D norm weights 1 + 0.1*randn, other 1-D 0.1*randn; timestep_scale_multiplier (0-D)
keeps diffusers' 1000. The latents_mean/std buffers get random values (the pipeline's business:
the decoder does not apply them). float32, one thread.

  /work/venv/bin/python tools/reference/vae_ltx.py   (torch 2.15.0, diffusers 0.42.1)
"""
import json
import math
import os
import sys

import torch
from diffusers import AutoencoderKLLTXVideo, LTXPipeline
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "fixtures",
                    "vae_ltx_tiny")

COMMON = dict(in_channels=3, out_channels=3, latent_channels=8, patch_size=2, patch_size_t=1,
              block_out_channels=(8, 16, 16), layers_per_block=(1, 1, 1, 1),
              spatio_temporal_scaling=(True, True, False),
              down_block_types=("LTXVideoDownBlock3D",) * 3, downsample_type=("conv",) * 3)

CONFIGS = {
    "plain": dict(COMMON, decoder_block_out_channels=(8, 16, 16), decoder_layers_per_block=(1, 1, 1, 1),
                  decoder_spatio_temporal_scaling=(True, True, False), decoder_inject_noise=(False,) * 4,
                  upsample_residual=(False,) * 3, upsample_factor=(1,) * 3, timestep_conditioning=False,
                  decoder_causal=False),
    "timestep": dict(COMMON, decoder_block_out_channels=(8, 16, 32), decoder_layers_per_block=(1, 2, 1, 1),
                     decoder_spatio_temporal_scaling=(True, True, True), decoder_inject_noise=(False,) * 4,
                     upsample_residual=(True,) * 3, upsample_factor=(2,) * 3, timestep_conditioning=True,
                     decoder_causal=True),
}


def reinit(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 0:
                continue
            if p.dim() >= 2 and name.endswith(".weight"):
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
            elif p.dim() >= 2:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "norm" in name and name.endswith(".weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        c = model.config.latent_channels
        model.latents_mean.copy_(0.3 * torch.randn(c, generator=g))
        model.latents_std.copy_(1 + 0.5 * torch.rand(c, generator=g))


def make(name, seed):
    vae = AutoencoderKLLTXVideo(**CONFIGS[name])
    reinit(vae, seed)
    vae.eval()
    out = os.path.join(ROOT, name)
    os.makedirs(out, exist_ok=True)
    vae.save_config(out)
    state = {k: v.contiguous() for k, v in vae.state_dict().items() if not k.startswith("encoder.")}
    meta = {"diffusers": __import__("diffusers").__version__, "torch": torch.__version__}
    save_file(state, os.path.join(out, "weights.safetensors"), metadata=meta)

    g = torch.Generator().manual_seed(seed + 100)
    latents = torch.randn(1, vae.config.latent_channels, 2, 3, 4, generator=g)
    inputs = {"latents": latents}
    temb = None
    if vae.config.timestep_conditioning:
        temb = torch.tensor([0.05])  # LTX-Video 0.9.1's decode_timestep
        inputs["timestep"] = temb

    captured = {}
    hooked = ["decoder.conv_in", "decoder.mid_block", "decoder.conv_out"] + [
        f"decoder.up_blocks.{i}" for i in range(len(vae.decoder.up_blocks))]
    modules = dict(vae.named_modules())
    for path in hooked:
        modules[path].register_forward_hook(
            lambda m, i, o, path=path: captured.__setitem__(path, o.detach().clone().contiguous()))
    with torch.no_grad():
        sample = vae.decode(latents, temb).sample
    save_file(inputs, os.path.join(out, "inputs.safetensors"), metadata=meta)
    # LTXPipeline's step before decode: denormalise, and with timestep conditioning mix in noise.
    normalized = torch.randn(latents.shape, generator=g)
    prepared = LTXPipeline._denormalize_latents(normalized, vae.latents_mean, vae.latents_std,
                                                vae.config.scaling_factor)
    pipeline = {"normalized": normalized}
    if vae.config.timestep_conditioning:
        noise = torch.randn(latents.shape, generator=g)
        scale = torch.tensor([0.025])[:, None, None, None, None]  # LTX-Video 0.9.1's decode_noise_scale
        prepared = (1 - scale) * prepared + scale * noise
        pipeline["noise"] = noise
    pipeline["prepared"] = prepared
    save_file(pipeline, os.path.join(out, "pipeline.safetensors"), metadata=meta)
    save_file({"sample": sample.contiguous()}, os.path.join(out, "expected.safetensors"), metadata=meta)
    save_file(captured, os.path.join(out, "intermediates.safetensors"), metadata=meta)
    print(name, "sample", tuple(sample.shape), "range", float(sample.min()), float(sample.max()))


def main():
    torch.set_num_threads(1)
    make("plain", 1)
    make("timestep", 2)


if __name__ == "__main__":
    sys.exit(main())
