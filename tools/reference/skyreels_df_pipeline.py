"""Reference for SkyReels-V2 diffusion forcing: diffusers' own SkyReelsV2DiffusionForcingPipeline.

1. generate_timestep_matrix for a set of cases (synchronous, staggered frames, staggered blocks,
   frames already denoised, a window shorter than the video, ar_step too small).
2. A 3-step rollout of the whole pipeline on a tiny random transformer (the skyreels_v2_tiny widths,
   blocks of 2 latent frames, block-causal attention) and VAE: 6 latent frames in 3 blocks, ar_step 1,
   so blocks start one step apart, frames not yet started or already finished are fed to the model
   but not stepped, and each frame's UniPC state (flow_shift 8, as SkyReels-V2 T2V) advances only
   where the update mask is set. Classifier-free guidance 6.0 (the pipeline's default) on given
   prompt and negative embeddings.

diffusers 0.42.1's prepare_latents returns the bare tensor when `latents=` is given, which __call__
cannot unpack; the script hands the given noise back in the tuple __call__ expects (a short video: no
prefix frames), so every other line of the loop is diffusers' own.

Writes tests/data/fixtures/skyreels_df_tiny/:
  timestep_matrix.json  cases: arguments and step_matrix, step_index, update_mask, valid_interval
                        (or the ValueError text)
  pipeline/             save_pretrained: model_index.json, transformer/ (num_frame_per_block 2), vae/,
                        scheduler/; no text encoder
  inputs.safetensors    prompt_embeds (1, 8, 16), negative_prompt_embeds (1, 6, 16), latents (1, 4, 6, 6, 4)
  expected.safetensors  latents (1, 4, 6, 6, 4): the final latents, before the VAE
  case.json             frames, height, width, steps, guidance, ar_step, causal_block_size, fps

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/skyreels_df_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from diffusers import (AutoencoderKLWan, SkyReelsV2DiffusionForcingPipeline, SkyReelsV2Transformer3DModel,
                       UniPCMultistepScheduler)
from safetensors.torch import save_file

from flux_pipeline import reinitialise

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/skyreels_df_tiny"
FRAMES, HEIGHT, WIDTH = 21, 48, 32  # 6 latent frames of 6 x 4 latents
STEPS, GUIDANCE, AR_STEP, BLOCK, FPS = 3, 6.0, 1, 2, 24


def scheduler():
    return UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                   num_train_timesteps=1000, flow_shift=8.0)


def matrix_cases(pipe):
    # (num_latent_frames, steps, base_num_latent_frames, ar_step, num_pre_ready, causal_block_size)
    cases = [(5, 4, 5, 0, 0, 1), (5, 3, 5, 1, 0, 1), (6, 3, 6, 1, 0, 2), (8, 5, 8, 2, 0, 2), (6, 4, 6, 3, 2, 1),
             (9, 4, 6, 2, 3, 3), (10, 4, 4, 4, 0, 1), (10, 8, 4, 1, 0, 1)]
    out = []
    for frames, steps, base, ar_step, pre_ready, block in cases:
        s = scheduler()
        s.set_timesteps(steps)
        case = {"num_latent_frames": frames, "step_template": s.timesteps.tolist(), "base_num_latent_frames": base,
                "ar_step": ar_step, "num_pre_ready": pre_ready, "causal_block_size": block}
        try:
            matrix, index, mask, interval = pipe.generate_timestep_matrix(frames, s.timesteps, base, ar_step,
                                                                          pre_ready, block)
            case.update(step_matrix=matrix.tolist(), step_index=index.tolist(), update_mask=mask.tolist(),
                        valid_interval=[list(v) for v in interval])
        except ValueError as e:
            case["error"] = str(e)
        out.append(case)
    return out


def main():
    torch.manual_seed(0)
    transformer = reinitialise(SkyReelsV2Transformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
        eps=1e-6, rope_max_seq_len=32, num_frame_per_block=BLOCK), 21)
    vae = reinitialise(AutoencoderKLWan(
        base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[],
        temperal_downsample=[False, True, True], latents_mean=[-0.5, 0.25, 0.1, -0.05],
        latents_std=[2.0, 1.5, 2.5, 1.25]), 22)
    pipe = SkyReelsV2DiffusionForcingPipeline(tokenizer=None, text_encoder=None, transformer=transformer, vae=vae,
                                              scheduler=scheduler())

    g = torch.Generator().manual_seed(23)
    prompt_embeds = 0.5 * torch.randn(1, 8, 16, generator=g)
    negative = 0.5 * torch.randn(1, 6, 16, generator=g)
    latent_frames = (FRAMES - 1) // pipe.vae_scale_factor_temporal + 1
    latents = torch.randn(1, 4, latent_frames, HEIGHT // pipe.vae_scale_factor_spatial,
                          WIDTH // pipe.vae_scale_factor_spatial, generator=g)
    pipe.prepare_latents = lambda *args, **kwargs: (latents.clone(), latent_frames, None, 0)

    with torch.no_grad():
        final = pipe(prompt=None, prompt_embeds=prompt_embeds, negative_prompt_embeds=negative, height=HEIGHT,
                     width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
                     ar_step=AR_STEP, base_num_frames=FRAMES, fps=FPS, output_type="latent").frames

    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    (OUT / "timestep_matrix.json").write_text(json.dumps(matrix_cases(pipe)) + "\n")
    pipe.save_pretrained(OUT / "pipeline", safe_serialization=True)
    save_file({"prompt_embeds": prompt_embeds, "negative_prompt_embeds": negative, "latents": latents.contiguous()},
              OUT / "inputs.safetensors")
    save_file({"latents": final.contiguous()}, OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps({
        "frames": FRAMES, "height": HEIGHT, "width": WIDTH, "steps": STEPS, "guidance": GUIDANCE,
        "ar_step": AR_STEP, "causal_block_size": BLOCK, "fps": FPS}, indent=2) + "\n")
    print("latents", tuple(final.shape), float(final.abs().max()), "moved", float((final - latents).abs().max()))


if __name__ == "__main__":
    main()
