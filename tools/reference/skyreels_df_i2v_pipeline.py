"""Reference for SkyReels-V2 image-to-video by diffusion forcing: diffusers' own
SkyReelsV2DiffusionForcingImageToVideoPipeline on the tiny pipeline of
tests/data/fixtures/skyreels_df_tiny, run with causal_block_size 1 (the transformer's
num_frame_per_block set to 1, as the pipeline's _set_ar_attention does), so a one-frame image prefix is
a whole block and counts as ready.

No CLIP: each image is resized to the video's size (here it already is: the PNGs are 32 x 48), scaled
to [-1, 1], encoded by the Wan VAE (the latent distribution's mode), normalised as
(latent - latents_mean) / latents_std and written over the first latent frame of the first chunk; a
last image's latent is appended after the last chunk's frames, fed at timestep 0 and never stepped.

Cases (tests/data/fixtures/skyreels_df_i2v/<case>/):
  first_last   13 frames (4 latent frames + the last image's), ar_step 1, guidance 5 on negative embeddings
  first_long   45 frames in chunks of 21 overlapping by 9 (12 latent frames: 3 chunks of 6, the later ones
               with a prefix of 3), the first image only, addnoise_condition 20 (the image frame too is
               fed noised: the pipeline counts it as the first chunk's prefix), no guidance
diffusers 0.42.1's image-to-video long video fails (IndexError) when the last chunk is shorter than
base_num_frames (it sizes the window by base_num_frames, not by the chunk), so the clip is 3 whole
chunks; and with a last image it marks the last chunk's last `overlap` frames, not the image's one, as
done, so that is no reference either: first_last covers the last image.

Each case folder: noise.safetensors (every random draw in order, as skyreels_df_long_video.py records
them; first_last draws only its initial latents, also in latents.safetensors as `latents` for the
command line's --latents), expected.safetensors (latents: the final latents without the last image's
frame, before the VAE), case.json. transformer_config.json: the pipeline's transformer config with
num_frame_per_block 1, as this run used it (the command line's --config). Beside them: first.png, last.png (RGB, 32 x 48), inputs.safetensors (prompt_embeds,
negative_prompt_embeds, `pixels` (2, 3, 48, 32): the two images as the pipeline's video_processor hands
them to the VAE, and `condition` (2, 4, 1, 6, 4): diffusers' normalised latents of the first and the
last image, for tests that start from latents).

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/skyreels_df_i2v_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import numpy as np
import torch
from PIL import Image
from diffusers import SkyReelsV2DiffusionForcingImageToVideoPipeline
from diffusers.pipelines.skyreels_v2 import pipeline_skyreels_v2_diffusion_forcing_i2v as i2v
from safetensors.torch import save_file

from skyreels_df_long_video import recording

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tests/data/fixtures/skyreels_df_tiny/pipeline"
OUT = ROOT / "tests/data/fixtures/skyreels_df_i2v"
HEIGHT, WIDTH, STEPS, FPS = 48, 32, 3, 24
CASES = {"first_last": dict(frames=13, last=True, ar_step=1, addnoise_condition=0.0, guidance=5.0),
         "first_long": dict(frames=45, last=False, ar_step=0, addnoise_condition=20.0, guidance=1.0,
                            base_num_frames=21, overlap_history=9)}


def run(pipe, first, last, prompt_embeds, negative, frames, ar_step, addnoise_condition, guidance,
        base_num_frames=None, overlap_history=None):
    draws, conditions = [], []
    randn_tensor, randn_like, prepare = i2v.randn_tensor, torch.randn_like, pipe.prepare_latents
    recorded = lambda draw: recording(draw, draws)  # noqa: E731

    def prepare_recorded(image, *args, **kwargs):
        out = prepare(image, *args, **kwargs)
        if image is not None:
            conditions.append(out[2].clone())
        return out

    i2v.randn_tensor, torch.randn_like, pipe.prepare_latents = recorded(randn_tensor), recorded(randn_like), \
        prepare_recorded
    try:
        with torch.no_grad():
            final = pipe(image=first, last_image=last, prompt=None, prompt_embeds=prompt_embeds,
                         negative_prompt_embeds=negative if guidance > 1 else None, height=HEIGHT, width=WIDTH,
                         num_frames=frames, num_inference_steps=STEPS, guidance_scale=guidance, ar_step=ar_step,
                         causal_block_size=1, base_num_frames=base_num_frames or frames,
                         overlap_history=overlap_history, addnoise_condition=addnoise_condition, fps=FPS,
                         generator=torch.Generator().manual_seed(41), output_type="latent").frames
    finally:
        i2v.randn_tensor, torch.randn_like, pipe.prepare_latents = randn_tensor, randn_like, prepare
    if last is not None:  # output_type="latent" keeps the last image's frame; the decoded video leaves it out
        final = final[:, :, :-1]
    return final, draws, conditions[0]


def main():
    torch.manual_seed(40)  # randn_like's global generator
    pipe = SkyReelsV2DiffusionForcingImageToVideoPipeline.from_pretrained(PIPELINE, tokenizer=None, text_encoder=None)
    g = torch.Generator().manual_seed(39)
    prompt_embeds = 0.5 * torch.randn(1, 8, 16, generator=g)
    negative = 0.5 * torch.randn(1, 6, 16, generator=g)
    rng = np.random.default_rng(38)

    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for name in ("first", "last"):  # smooth gradients plus noise: images a VAE gives varied latents
        y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
        base = np.stack([x * 255 / WIDTH, y * 255 / HEIGHT, (x + y) * 127 / (WIDTH + HEIGHT)], -1)
        pixels = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels if name == "first" else pixels[::-1, ::-1].copy(), "RGB").save(OUT / f"{name}.png")
    first, last = Image.open(OUT / "first.png"), Image.open(OUT / "last.png")

    condition = None
    for name, case in CASES.items():
        final, draws, cond = run(pipe, first, last if case["last"] else None, prompt_embeds, negative,
                                 **{k: v for k, v in case.items() if k != "last"})
        if case["last"]:
            condition = cond
        (OUT / name).mkdir()
        save_file({f"noise_{i}": d.contiguous() for i, d in enumerate(draws)}, OUT / name / "noise.safetensors")
        save_file({"latents": final.contiguous()}, OUT / name / "expected.safetensors")
        if len(draws) == 1:
            save_file({"latents": draws[0].contiguous()}, OUT / name / "latents.safetensors")
        (OUT / name / "case.json").write_text(json.dumps({
            "height": HEIGHT, "width": WIDTH, "steps": STEPS, "fps": FPS, "draws": len(draws), **case}, indent=2) + "\n")
        print(name, tuple(final.shape), "draws", [tuple(d.shape) for d in draws], float(final.abs().max()))
    config = {k: v for k, v in dict(pipe.transformer.config).items() if not k.startswith("_")}
    (OUT / "transformer_config.json").write_text(json.dumps(
        {"_class_name": type(pipe.transformer).__name__, **json.loads(json.dumps(config))}, indent=2, sort_keys=True) + "\n")
    pixels = torch.cat([pipe.video_processor.preprocess(image, height=HEIGHT, width=WIDTH) for image in (first, last)])
    save_file({"prompt_embeds": prompt_embeds, "negative_prompt_embeds": negative, "pixels": pixels.contiguous(),
               "condition": condition.contiguous()}, OUT / "inputs.safetensors")
    print("condition", tuple(condition.shape), float(condition.abs().max()))


if __name__ == "__main__":
    main()
