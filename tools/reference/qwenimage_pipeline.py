"""Reference for `cpdit generate` end to end on Qwen-Image: diffusers' own QwenImagePipeline on a tiny
random transformer and VAE, with the prompt embeddings (padded, with their mask), the negative pair and
the initial (packed) noise given, 3 steps of Qwen-Image's scheduler (dynamic shift, shift_terminal 0.02),
true CFG 4.0 with the norm rescale, decoded to an image; and the same without CFG (true_cfg_scale 1).

Writes tests/data/fixtures/qwenimage_pipeline_tiny/:
  pipeline/            QwenImagePipeline.save_pretrained: model_index.json, transformer/
                       (QwenImageTransformer2DModel, in_channels 16, 2 heads of 16, 2 blocks, joint 24),
                       vae/ (AutoencoderKLQwenImage, z_dim 4, dim_mult (1, 2), temperal_downsample (False,):
                       scale factor 2, with latents_mean/std), scheduler/ (Qwen-Image's); no text encoder
  inputs.safetensors   prompt_embeds (1, 9, 24) with prompt_embeds_mask (1, 9) I64 (last 3 padding),
                       negative_prompt_embeds (1, 5, 24) with an all-ones mask, latents (1, 64, 16) packed
  expected.safetensors latents (1, 4, 1, 16, 16): the final latents unpacked, before the VAE's
                       denormalisation, with true CFG 4.0; latents_no_cfg the same at true_cfg_scale 1;
                       image (1, 32, 32, 3) float32 in [0, 1] (output_type="np") of the CFG run
  case.json            height, width, steps, true_cfg_scale

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/qwenimage_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImagePipeline,
                       QwenImageTransformer2DModel)
from safetensors.torch import save_file

from flux_pipeline import reinitialise  # same folder: weights N(0, 1/fan_in), norm scales near 1

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/qwenimage_pipeline_tiny"
HEIGHT = WIDTH = 32
STEPS = 3
TRUE_CFG = 4.0


def main():
    torch.manual_seed(0)
    transformer = reinitialise(QwenImageTransformer2DModel(
        patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=24, axes_dims_rope=(4, 6, 6)), 21)
    vae = reinitialise(AutoencoderKLQwenImage(
        base_dim=8, z_dim=4, dim_mult=[1, 2], num_res_blocks=1, attn_scales=[], temperal_downsample=[False],
        latents_mean=[-0.5, 0.25, 0.1, -0.05], latents_std=[2.0, 1.5, 2.5, 1.25]), 22)
    scheduler = FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
        base_image_seq_len=256, max_image_seq_len=8192, shift_terminal=0.02, time_shift_type="exponential")
    pipe = QwenImagePipeline(scheduler=scheduler, vae=vae, text_encoder=None, tokenizer=None, transformer=transformer)

    g = torch.Generator().manual_seed(23)
    prompt_embeds = torch.randn(1, 9, 24, generator=g)
    prompt_mask = torch.tensor([[1] * 6 + [0] * 3], dtype=torch.int64)
    prompt_embeds[:, 6:] = 0  # the text encoder's padded rows are zero
    negative_embeds = torch.randn(1, 5, 24, generator=g)
    negative_mask = torch.ones(1, 5, dtype=torch.int64)
    h = 2 * (HEIGHT // (pipe.vae_scale_factor * 2))
    w = 2 * (WIDTH // (pipe.vae_scale_factor * 2))
    latents = torch.randn(1, (h // 2) * (w // 2), transformer.config.in_channels, generator=g)

    common = dict(prompt_embeds=prompt_embeds, prompt_embeds_mask=prompt_mask, negative_prompt_embeds=negative_embeds,
                  negative_prompt_embeds_mask=negative_mask, latents=latents, height=HEIGHT, width=WIDTH,
                  num_inference_steps=STEPS)
    with torch.no_grad():
        packed = pipe(output_type="latent", true_cfg_scale=TRUE_CFG, **common).images
        packed_no_cfg = pipe(output_type="latent", true_cfg_scale=1.0, **common).images
        image = pipe(output_type="np", true_cfg_scale=TRUE_CFG, **common).images
    final = QwenImagePipeline._unpack_latents(packed, HEIGHT, WIDTH, pipe.vae_scale_factor)
    final_no_cfg = QwenImagePipeline._unpack_latents(packed_no_cfg, HEIGHT, WIDTH, pipe.vae_scale_factor)

    if OUT.exists():
        shutil.rmtree(OUT)
    pipe.save_pretrained(OUT / "pipeline", safe_serialization=True)
    save_file({"prompt_embeds": prompt_embeds, "prompt_embeds_mask": prompt_mask,
               "negative_prompt_embeds": negative_embeds, "negative_prompt_embeds_mask": negative_mask,
               "latents": latents.contiguous()}, OUT / "inputs.safetensors")
    save_file({"latents": final.contiguous(), "latents_no_cfg": final_no_cfg.contiguous(),
               "image": torch.from_numpy(image).contiguous()}, OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps(
        {"height": HEIGHT, "width": WIDTH, "steps": STEPS, "true_cfg_scale": TRUE_CFG}, indent=2) + "\n")
    print("image", image.shape, image.min(), image.max(), "latents", tuple(final.shape), float(final.abs().max()),
          "cfg moves latents by", float((final - final_no_cfg).abs().max()))


if __name__ == "__main__":
    main()
