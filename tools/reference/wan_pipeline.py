"""Reference for `cpdit generate` end to end on Wan 2.1 text-to-video with classifier-free guidance:
diffusers' own WanPipeline on a tiny random transformer and VAE, with the prompt and negative
embeddings and the initial latents given, 3 steps, guidance 5.0 (the pipeline's default).

Writes tests/data/fixtures/wan_pipeline_tiny/:
  pipeline/            WanPipeline.save_pretrained: model_index.json, transformer/ (WanTransformer3DModel,
                       the wan_tiny widths), vae/ (AutoencoderKLWan, the vae_wan_tiny widths, z_dim 4),
                       scheduler/ (UniPCMultistepScheduler, flow_shift 3.0 as Wan 2.1 480p); no text encoder
  inputs.safetensors   prompt_embeds (1, 8, 16), negative_prompt_embeds (1, 6, 16), latents (1, 4, 2, 6, 4)
  expected.safetensors latents (1, 4, 2, 6, 4): the final latents, before the VAE's denormalisation;
                       video (1, 5, 48, 32, 3) float32 in [0, 1] (output_type="np")
  case.json            frames, height, width, steps, guidance

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/wan_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import numpy as np
import torch
from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
from safetensors.torch import save_file

from flux_pipeline import reinitialise

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/wan_pipeline_tiny"
FRAMES, HEIGHT, WIDTH = 5, 48, 32
STEPS = 3
GUIDANCE = 5.0


def main():
    torch.manual_seed(0)
    transformer = reinitialise(WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
        qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=32), 11)
    vae = reinitialise(AutoencoderKLWan(
        base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[],
        temperal_downsample=[False, True, True], latents_mean=[-0.5, 0.25, 0.1, -0.05],
        latents_std=[2.0, 1.5, 2.5, 1.25]), 12)
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                        num_train_timesteps=1000, flow_shift=3.0)
    pipe = WanPipeline(tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=scheduler)

    g = torch.Generator().manual_seed(13)
    prompt_embeds = 0.5 * torch.randn(1, 8, 16, generator=g)
    negative = 0.5 * torch.randn(1, 6, 16, generator=g)
    latent_frames = (FRAMES - 1) // pipe.vae_scale_factor_temporal + 1
    latents = torch.randn(1, 4, latent_frames, HEIGHT // pipe.vae_scale_factor_spatial,
                          WIDTH // pipe.vae_scale_factor_spatial, generator=g)

    common = dict(prompt_embeds=prompt_embeds, negative_prompt_embeds=negative, latents=latents, height=HEIGHT,
                  width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=GUIDANCE)
    with torch.no_grad():
        final = pipe(output_type="latent", **common).frames
        video = pipe(output_type="np", **common).frames

    if OUT.exists():
        shutil.rmtree(OUT)
    pipe.save_pretrained(OUT / "pipeline", safe_serialization=True)
    save_file({"prompt_embeds": prompt_embeds, "negative_prompt_embeds": negative, "latents": latents.contiguous()},
              OUT / "inputs.safetensors")
    save_file({"latents": final.contiguous(), "video": torch.from_numpy(np.ascontiguousarray(video)).float()},
              OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps({"frames": FRAMES, "height": HEIGHT, "width": WIDTH, "steps": STEPS,
                                               "guidance": GUIDANCE}, indent=2) + "\n")
    print("video", video.shape, video.min(), video.max(), "latents", tuple(final.shape), float(final.abs().max()))


if __name__ == "__main__":
    main()
