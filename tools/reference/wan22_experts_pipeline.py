"""Reference for Wan 2.2 A14B's two experts: diffusers' own WanPipeline and WanImageToVideoPipeline with a
transformer_2 and a boundary_ratio, on tiny random models. Every timestep at or above boundary_ratio *
num_train_timesteps goes to `transformer` (the high-noise expert) at guidance_scale, every one below to
`transformer_2` at guidance_scale_2; both passes of classifier-free guidance run while guidance_scale > 1.

Writes tests/data/fixtures/wan22_experts/:
  inputs.safetensors   prompt_embeds, negative_prompt_embeds (1, 512, 16: 8 and 6 tokens, then zeros, as
                       encode_prompt pads them), latents (1, 4, 3, 6, 4)
  <case>/pipeline/     save_pretrained: transformer/ and transformer_2/ (WanTransformer3DModel, the
                       wan_pipeline_tiny widths, different seeds), vae/ (wan_pipeline_tiny's), scheduler/
                       (UniPC, flow_shift 3.0); model_index.json holds boundary_ratio
  <case>/expected.safetensors  latents: the final latents, before the VAE's denormalisation
  <case>/case.json     frames, height, width, steps, guidance, guidance_2, boundary_ratio, and the timesteps
                       each expert took
Cases: t2v (WanPipeline, 4 steps, boundary 0.9: 2 steps each) and i2v (WanImageToVideoPipeline as Wan 2.2
I2V A14B: in_channels 12, no image encoder (image_dim null), the first image of wan_i2v_pipeline).

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/wan22_experts_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from PIL import Image
from diffusers import WanImageToVideoPipeline, WanPipeline, WanTransformer3DModel
from safetensors.torch import save_file

from flux_pipeline import reinitialise
from wan_i2v_pipeline import FRAMES, HEIGHT, WIDTH, shared_parts

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/fixtures"
OUT = FIXTURES / "wan22_experts"
STEPS = 4
GUIDANCE, GUIDANCE_2 = 4.0, 3.0  # Wan 2.2 T2V A14B's defaults in diffusers' examples
BOUNDARY = 0.9
WIDTHS = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, out_channels=4, text_dim=16,
              freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
              rope_max_seq_len=32)


def experts(in_channels, seed):
    return [reinitialise(WanTransformer3DModel(**WIDTHS, in_channels=in_channels), seed + i) for i in range(2)]


def main():
    torch.manual_seed(0)
    vae, scheduler, inputs, _ = shared_parts(61)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    save_file(inputs, OUT / "inputs.safetensors")

    high, low = experts(4, 62)
    t2v = WanPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=scheduler, transformer=high,
                      transformer_2=low, boundary_ratio=BOUNDARY)
    high, low = experts(12, 64)
    i2v = WanImageToVideoPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=scheduler, transformer=high,
                                  transformer_2=low, boundary_ratio=BOUNDARY)
    image = Image.open(FIXTURES / "wan_i2v_pipeline/first.png").convert("RGB")
    for case, pipe, extra in (("t2v", t2v, {}), ("i2v", i2v, {"image": image})):
        taken = {"transformer": [], "transformer_2": []}
        for name in taken:
            getattr(pipe, name).register_forward_pre_hook(
                lambda _m, _a, kwargs, name=name: taken[name].append(float(kwargs["timestep"][0])),
                with_kwargs=True)
        with torch.no_grad():
            final = pipe(**extra, prompt_embeds=inputs["prompt_embeds"],
                         negative_prompt_embeds=inputs["negative_prompt_embeds"], latents=inputs["latents"],
                         height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS,
                         guidance_scale=GUIDANCE, guidance_scale_2=GUIDANCE_2, output_type="latent").frames
        assert taken["transformer"] and taken["transformer_2"], taken
        pipe.save_pretrained(OUT / case / "pipeline", safe_serialization=True)
        save_file({"latents": final.contiguous()}, OUT / case / "expected.safetensors")
        (OUT / case / "case.json").write_text(json.dumps({
            "frames": FRAMES, "height": HEIGHT, "width": WIDTH, "steps": STEPS, "guidance": GUIDANCE,
            "guidance_2": GUIDANCE_2, "boundary_ratio": BOUNDARY, "timesteps": taken}, indent=2) + "\n")
        print(case, tuple(final.shape), float(final.abs().max()), taken)


if __name__ == "__main__":
    main()
