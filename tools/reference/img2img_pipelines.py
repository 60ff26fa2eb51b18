"""Reference for image-to-image: diffusers' own FluxImg2ImgPipeline on tests/data/fixtures/flux_pipeline_tiny/
pipeline and QwenImageImg2ImgPipeline on qwenimage_pipeline_tiny/pipeline, with the prompt embeddings given
and every random draw recorded.

What the pipelines do with the image (diffusers 0.42.1):
- the VaeImageProcessor resizes the PNG to height x width (PIL's Lanczos) and scales it to [-1, 1];
- the VAE encodes it and samples its posterior: mean + exp(0.5 * clamp(logvar, -30, 20)) * noise (random
  draw 0, the latents' shape); FLUX.1 then takes (x - shift_factor) * scaling_factor, Qwen-Image (x -
  latents_mean) * (1 / latents_std) per channel (its VAE sees the image as a one-frame video);
- the schedule is the text-to-image pipeline's (linspace sigmas, shifted by mu of the image tokens), of
  which the first int(steps - min(steps * strength, steps)) steps are skipped; the initial latents are the
  scheduler's scale_noise at the first step kept: sigma * noise + (1 - sigma) * image latents (noise:
  random draw 1), then packed;
- the loop is the text-to-image pipeline's over the steps kept (Qwen-Image: true CFG 4.0 on the negative
  pair, with its norm rescale).

Writes tests/data/fixtures/flux_img2img/ and qwenimage_img2img/:
  image.png            (flux_img2img only) RGB 40 x 36, resized to 32 x 32 by both
  inputs.safetensors   the text-to-image fixture's embeddings (and masks)
  expected.safetensors pixels (1, 3, 32, 32): the processed image; posterior_noise and noise: the two random
                       draws; image_latents (1, 4, 16, 16): the latents the image becomes (Qwen-Image's with
                       their frame axis, (1, 4, 1, 16, 16)); initial_latents (1, 64, 16): prepare_latents'
                       packed start; latents: the final latents unpacked, before the VAE
  latents.safetensors  latents: initial_latents again, under the name the command line's --latents reads
  case.json            height, width, steps, strength, guidance, and the timesteps the loop ran

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/img2img_pipelines.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import numpy as np
import torch
from PIL import Image
from diffusers import FluxImg2ImgPipeline, FluxPipeline, QwenImageImg2ImgPipeline, QwenImagePipeline
from diffusers.models.autoencoders import vae as vae_module
from diffusers.pipelines.flux import pipeline_flux_img2img as flux_img2img
from diffusers.pipelines.qwenimage import pipeline_qwenimage_img2img as qwen_img2img
from safetensors.torch import load_file, save_file

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests/data/fixtures"
IMAGE = FIXTURES / "flux_img2img" / "image.png"
HEIGHT = WIDTH = 32
STEPS = 5
STRENGTH = 0.6  # the pipelines' default: int(5 - 3.0) = 2 steps skipped, 3 run


def write_image():
    rng = np.random.default_rng(71)
    y, x = np.mgrid[0:36, 0:40]
    base = np.stack([x * 255 / 40, y * 255 / 36, 128 + 80 * np.sin((x + y) / 6.0)], -1)
    Image.fromarray(np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8), "RGB").save(IMAGE)


def run(pipe, module, out, inputs, unpack, **call):
    """The pipeline on IMAGE with every random draw, the encoded image, the start and the timesteps recorded."""
    seen, draws, timesteps = {}, [], []
    randn_vae, randn_pipe = vae_module.randn_tensor, module.randn_tensor
    encode, prepare = pipe._encode_vae_image, pipe.prepare_latents

    def recorded(draw):
        def wrapper(*args, **kwargs):
            draws.append(draw(*args, **kwargs).clone())
            return draws[-1]
        return wrapper

    def encode_recorded(*args, **kwargs):
        seen["image_latents"] = encode(*args, **kwargs).clone()
        return seen["image_latents"]

    def prepare_recorded(image, *args, **kwargs):
        seen["pixels"] = image.clone()
        result = prepare(image, *args, **kwargs)
        seen["initial_latents"] = (result[0] if isinstance(result, tuple) else result).clone()
        return result

    vae_module.randn_tensor, module.randn_tensor = recorded(randn_vae), recorded(randn_pipe)
    pipe._encode_vae_image, pipe.prepare_latents = encode_recorded, prepare_recorded
    pipe.transformer.register_forward_pre_hook(
        lambda _m, _a, kwargs: timesteps.append(float(kwargs["timestep"][0]) * 1000), with_kwargs=True)
    try:
        with torch.no_grad():
            packed = pipe(image=Image.open(IMAGE), **inputs, height=HEIGHT, width=WIDTH, num_inference_steps=STEPS,
                          strength=STRENGTH, generator=torch.Generator().manual_seed(72), output_type="latent",
                          **call).images
    finally:
        vae_module.randn_tensor, module.randn_tensor = randn_vae, randn_pipe
    assert len(draws) == 2, len(draws)
    out.mkdir(parents=True, exist_ok=True)
    save_file(inputs, out / "inputs.safetensors")
    save_file({"latents": seen["initial_latents"].contiguous()}, out / "latents.safetensors")
    save_file({"pixels": seen["pixels"].contiguous(), "posterior_noise": draws[0].contiguous(),
               "noise": draws[1].contiguous(), "image_latents": seen["image_latents"].contiguous(),
               "initial_latents": seen["initial_latents"].contiguous(),
               "latents": unpack(packed, HEIGHT, WIDTH, pipe.vae_scale_factor).contiguous()},
              out / "expected.safetensors")
    (out / "case.json").write_text(json.dumps({"height": HEIGHT, "width": WIDTH, "steps": STEPS, "strength": STRENGTH,
                                               **call, "timesteps": timesteps}, indent=2) + "\n")
    print(out.name, "timesteps", timesteps, {k: tuple(v.shape) for k, v in seen.items()})


def main():
    for name in ("flux_img2img", "qwenimage_img2img"):
        if (FIXTURES / name).exists():
            shutil.rmtree(FIXTURES / name)
    (FIXTURES / "flux_img2img").mkdir(parents=True)
    write_image()

    flux = FluxImg2ImgPipeline.from_pretrained(FIXTURES / "flux_pipeline_tiny/pipeline", text_encoder=None,
                                               tokenizer=None, text_encoder_2=None, tokenizer_2=None)
    embeds = load_file(FIXTURES / "flux_pipeline_tiny/inputs.safetensors")
    run(flux, flux_img2img, FIXTURES / "flux_img2img",
        {k: embeds[k] for k in ("prompt_embeds", "pooled_prompt_embeds")}, FluxPipeline._unpack_latents,
        guidance_scale=3.5)

    qwen = QwenImageImg2ImgPipeline.from_pretrained(FIXTURES / "qwenimage_pipeline_tiny/pipeline", text_encoder=None,
                                                    tokenizer=None)
    embeds = load_file(FIXTURES / "qwenimage_pipeline_tiny/inputs.safetensors")
    run(qwen, qwen_img2img, FIXTURES / "qwenimage_img2img", {k: v for k, v in embeds.items() if k != "latents"},
        QwenImagePipeline._unpack_latents, true_cfg_scale=4.0)


if __name__ == "__main__":
    main()
