"""Reference for SkyReels-V2 long video: diffusers' own SkyReelsV2DiffusionForcingPipeline with
overlap_history, on the tiny pipeline of tests/data/fixtures/skyreels_df_tiny (blocks of 2 latent frames).

37 frames (10 latent frames) in chunks of base_num_frames 21 (6 latent frames); overlap_history 9 is 3
latent frames, so each later chunk starts from the last 3 frames of what came before, cut to 2 (a whole
block) as prepare_latents cuts it, those 2 counted as ready in the chunk's timestep matrix. Chunks: 6
frames, then 6 (2 prefix), then 4 (2 prefix); the final latents are the first chunk and each later
chunk without its first 3 frames: 6 + 3 + 1 = 10. With addnoise_condition 20 the prefix frames are fed
to the model as 0.98 x + 0.02 x fresh noise at timestep 20 on every iteration.

The pipeline draws its noise in this order: each chunk's initial latents (randn_tensor, the prefix
frames then overwritten) and, inside a later chunk, one torch.randn_like per iteration for the noisy
prefix. The script records every draw as it is made (noise_0, noise_1, ...), so a test can feed the
same numbers in the same order; every line of the loop is diffusers' own.

Two cases: `addnoise` (ar_step 1, addnoise_condition 20, guidance 6 on negative embeddings) and
`plain` (ar_step 0, no added noise, no guidance).

Writes tests/data/fixtures/skyreels_df_long/<case>/:
  noise.safetensors     noise_0 ... noise_{n-1}: every random draw, in order
  expected.safetensors  latents (1, 4, 10, 6, 4): the final latents, before the VAE
  case.json             frames, base_num_frames, overlap_history, addnoise_condition, ar_step, steps,
                        guidance, fps, draws
and tests/data/fixtures/skyreels_df_long/inputs.safetensors: prompt_embeds, negative_prompt_embeds.

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/skyreels_df_long_video.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from diffusers import SkyReelsV2DiffusionForcingPipeline
from diffusers.pipelines.skyreels_v2 import pipeline_skyreels_v2_diffusion_forcing as df
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tests/data/fixtures/skyreels_df_tiny/pipeline"
OUT = ROOT / "tests/data/fixtures/skyreels_df_long"
FRAMES, BASE, OVERLAP, HEIGHT, WIDTH, STEPS, FPS = 37, 21, 9, 48, 32, 3, 24
CASES = {"addnoise": dict(ar_step=1, addnoise_condition=20.0, guidance=6.0),
         "plain": dict(ar_step=0, addnoise_condition=0.0, guidance=1.0)}


def recording(draw, draws):
    """`draw` (a random function) that also appends each value it returns to `draws`."""
    def wrapper(*args, **kwargs):
        value = draw(*args, **kwargs)
        draws.append(value.clone())
        return value
    return wrapper


def run(pipe, prompt_embeds, negative, ar_step, addnoise_condition, guidance):
    draws = []
    randn_tensor, randn_like = df.randn_tensor, torch.randn_like
    recorded = lambda draw: recording(draw, draws)  # noqa: E731
    df.randn_tensor, torch.randn_like = recorded(randn_tensor), recorded(randn_like)
    try:
        with torch.no_grad():
            final = pipe(prompt=None, prompt_embeds=prompt_embeds,
                         negative_prompt_embeds=negative if guidance > 1 else None, height=HEIGHT, width=WIDTH,
                         num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=guidance, ar_step=ar_step,
                         base_num_frames=BASE, overlap_history=OVERLAP, addnoise_condition=addnoise_condition,
                         fps=FPS, generator=torch.Generator().manual_seed(31), output_type="latent").frames
    finally:
        df.randn_tensor, torch.randn_like = randn_tensor, randn_like
    return final, draws


def main():
    torch.manual_seed(30)  # randn_like's global generator
    pipe = SkyReelsV2DiffusionForcingPipeline.from_pretrained(PIPELINE, tokenizer=None, text_encoder=None)
    g = torch.Generator().manual_seed(29)
    prompt_embeds = 0.5 * torch.randn(1, 8, 16, generator=g)
    negative = 0.5 * torch.randn(1, 6, 16, generator=g)

    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    save_file({"prompt_embeds": prompt_embeds, "negative_prompt_embeds": negative}, OUT / "inputs.safetensors")
    for name, case in CASES.items():
        final, draws = run(pipe, prompt_embeds, negative, **case)
        (OUT / name).mkdir()
        save_file({f"noise_{i}": d.contiguous() for i, d in enumerate(draws)}, OUT / name / "noise.safetensors")
        save_file({"latents": final.contiguous()}, OUT / name / "expected.safetensors")
        (OUT / name / "case.json").write_text(json.dumps({
            "frames": FRAMES, "base_num_frames": BASE, "overlap_history": OVERLAP, "height": HEIGHT, "width": WIDTH,
            "steps": STEPS, "fps": FPS, "draws": len(draws), **case}, indent=2) + "\n")
        print(name, tuple(final.shape), "draws", [tuple(d.shape) for d in draws], float(final.abs().max()))


if __name__ == "__main__":
    main()
