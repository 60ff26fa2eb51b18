"""Reference for FLUX.1 image-to-image: diffusers' own FluxImg2ImgPipeline on tests/data/fixtures/
flux_pipeline_tiny/pipeline, with the prompt embeddings given and every random draw recorded.

What the pipeline does with the image (diffusers 0.42.1):
- its VaeImageProcessor resizes the PNG to height x width (PIL's Lanczos) and scales it to [-1, 1];
- the VAE encodes it and samples its posterior: mean + exp(0.5 * clamp(logvar, -30, 20)) * noise (random
  draw 0, the latents' shape), then (x - shift_factor) * scaling_factor;
- the schedule is FluxPipeline's (linspace sigmas, shifted by mu of the image tokens), of which the first
  int(steps - min(steps * strength, steps)) steps are skipped; the initial latents are the scheduler's
  scale_noise at the first step kept: sigma * noise + (1 - sigma) * image latents (noise: random draw 1),
  then packed;
- the loop is FluxPipeline's over the steps kept.

Writes tests/data/fixtures/flux_img2img/:
  image.png            RGB 40 x 36 (resized to the case's 32 x 32)
  inputs.safetensors   prompt_embeds (1, 8, 32), pooled_prompt_embeds (1, 32) (flux_pipeline_tiny's)
  expected.safetensors pixels (1, 3, 32, 32): the processed image; posterior_noise (1, 4, 16, 16) and noise
                       (1, 4, 16, 16): the two random draws; image_latents (1, 4, 16, 16): shifted and scaled;
                       initial_latents (1, 64, 16): prepare_latents' packed latents; latents (1, 4, 16, 16):
                       the final latents unpacked, before the VAE's scaling
  latents.safetensors  latents: initial_latents again, under the name the command line's --latents reads
  case.json            height, width, steps, strength, guidance, and the timesteps the loop ran

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/flux_img2img_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import numpy as np
import torch
from PIL import Image
from diffusers import FluxImg2ImgPipeline, FluxPipeline
from diffusers.models.autoencoders import vae as vae_module
from diffusers.pipelines.flux import pipeline_flux_img2img as img2img
from safetensors.torch import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests/data/fixtures/flux_pipeline_tiny"
OUT = ROOT / "tests/data/fixtures/flux_img2img"
HEIGHT = WIDTH = 32
STEPS = 5
STRENGTH = 0.6  # the pipeline's default: int(5 - 3.0) = 2 steps skipped, 3 run
GUIDANCE = 3.5


def main():
    pipe = FluxImg2ImgPipeline.from_pretrained(SOURCE / "pipeline", text_encoder=None, tokenizer=None,
                                               text_encoder_2=None, tokenizer_2=None)
    inputs = {k: v for k, v in load_file(SOURCE / "inputs.safetensors").items()
              if k in ("prompt_embeds", "pooled_prompt_embeds")}
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    rng = np.random.default_rng(71)
    y, x = np.mgrid[0:36, 0:40]
    base = np.stack([x * 255 / 40, y * 255 / 36, 128 + 80 * np.sin((x + y) / 6.0)], -1)
    Image.fromarray(np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8), "RGB").save(OUT / "image.png")
    image = Image.open(OUT / "image.png")

    seen, draws, timesteps = {}, [], []
    randn_vae, randn_pipe = vae_module.randn_tensor, img2img.randn_tensor
    encode, prepare = pipe._encode_vae_image, pipe.prepare_latents

    def recorded(draw):
        def wrapper(*args, **kwargs):
            out = draw(*args, **kwargs)
            draws.append(out.clone())
            return out
        return wrapper

    def encode_recorded(*args, **kwargs):
        seen["image_latents"] = encode(*args, **kwargs).clone()
        return seen["image_latents"]

    def prepare_recorded(image, *args, **kwargs):
        seen["pixels"] = image.clone()
        out = prepare(image, *args, **kwargs)
        seen["initial_latents"] = out[0].clone()
        return out

    vae_module.randn_tensor, img2img.randn_tensor = recorded(randn_vae), recorded(randn_pipe)
    pipe._encode_vae_image, pipe.prepare_latents = encode_recorded, prepare_recorded
    pipe.transformer.register_forward_pre_hook(
        lambda _m, _a, kwargs: timesteps.append(float(kwargs["timestep"][0]) * 1000), with_kwargs=True)
    try:
        with torch.no_grad():
            packed = pipe(image=image, prompt_embeds=inputs["prompt_embeds"],
                          pooled_prompt_embeds=inputs["pooled_prompt_embeds"], height=HEIGHT, width=WIDTH,
                          num_inference_steps=STEPS, strength=STRENGTH, guidance_scale=GUIDANCE,
                          generator=torch.Generator().manual_seed(72), output_type="latent").images
    finally:
        vae_module.randn_tensor, img2img.randn_tensor = randn_vae, randn_pipe
    assert len(draws) == 2, len(draws)
    final = FluxPipeline._unpack_latents(packed, HEIGHT, WIDTH, pipe.vae_scale_factor)

    save_file(inputs, OUT / "inputs.safetensors")
    save_file({"latents": seen["initial_latents"].contiguous()}, OUT / "latents.safetensors")
    save_file({"pixels": seen["pixels"].contiguous(), "posterior_noise": draws[0].contiguous(),
               "noise": draws[1].contiguous(), "image_latents": seen["image_latents"].contiguous(),
               "initial_latents": seen["initial_latents"].contiguous(), "latents": final.contiguous()},
              OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps({"height": HEIGHT, "width": WIDTH, "steps": STEPS, "strength": STRENGTH,
                                               "guidance": GUIDANCE, "timesteps": timesteps}, indent=2) + "\n")
    print("latents", tuple(final.shape), float(final.abs().max()), "timesteps", timesteps,
          {k: tuple(v.shape) for k, v in seen.items()})


if __name__ == "__main__":
    main()
