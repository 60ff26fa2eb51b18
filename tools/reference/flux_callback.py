"""Reference for callback_on_step_end on FLUX.1: diffusers' own FluxPipeline on the flux_pipeline_tiny
fixture (tools/reference/flux_pipeline.py's pipeline folder and inputs, its 3 steps at guidance 3.5) with a
callback that changes the latents after step 1's scheduler step (x 0.5 + 0.1), and records the step
indices, timesteps and latents' shapes it saw.

Writes tests/data/fixtures/flux_pipeline_tiny/callback.safetensors:
  latents    (1, 64, 16) the final latents, packed as FluxPipeline returns them (output_type="latent")
  steps      (3,) int64  the step index each callback call got
  timesteps  (3,) f32    the timestep each call got (FluxPipeline's t: sigma x 1000)

    OMP_NUM_THREADS=1 /work/refvenv/bin/python tools/reference/flux_callback.py   # torch 2.15, diffusers 0.42.1
"""
import pathlib

import torch
from diffusers import FluxPipeline
from safetensors.torch import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASE = ROOT / "tests/data/fixtures/flux_pipeline_tiny"
EDITED_STEP, SCALE, SHIFT = 1, 0.5, 0.1


def main():
    pipe = FluxPipeline.from_pretrained(CASE / "pipeline", text_encoder=None, tokenizer=None, text_encoder_2=None,
                                        tokenizer_2=None, torch_dtype=torch.float32)
    inputs = load_file(CASE / "inputs.safetensors")
    seen = []

    def callback(pipe, step, timestep, callback_kwargs):
        latents = callback_kwargs["latents"]
        seen.append((step, float(timestep), tuple(latents.shape)))
        if step == EDITED_STEP:
            callback_kwargs["latents"] = latents * SCALE + SHIFT
        return callback_kwargs

    with torch.no_grad():
        packed = pipe(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                      latents=inputs["latents"], height=32, width=32, num_inference_steps=3, guidance_scale=3.5,
                      output_type="latent", callback_on_step_end=callback,
                      callback_on_step_end_tensor_inputs=["latents"]).images
    save_file({"latents": packed.contiguous(), "steps": torch.tensor([s for s, _, _ in seen], dtype=torch.int64),
               "timesteps": torch.tensor([t for _, t, _ in seen], dtype=torch.float32)},
              CASE / "callback.safetensors")
    print("seen", seen, "latents", tuple(packed.shape), float(packed.abs().max()))


if __name__ == "__main__":
    main()
