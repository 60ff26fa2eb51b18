"""Reference for Wan 2.1 image-to-video (I2V) and first-last-frame-to-video (FLF2V): diffusers' own
WanImageToVideoPipeline on tiny random models, and SkyReelsV2ImageToVideoPipeline (the same loop on a
SkyReels-V2 network, its image encoder a CLIPVisionModelWithProjection), with the prompt and negative
embeddings and the initial latents given, 3 steps, guidance 5.0 (the pipelines' default).

What the pipeline does with the images (diffusers 0.42.1):
- encode_image: CLIPImageProcessor on the image (and the last image: both in one batch), CLIPVisionModel's
  penultimate hidden states (hidden_states[-2]) -> the transformer's encoder_hidden_states_image;
- prepare_latents: the image resized to the video's size by its video processor, as frame 0 of a video
  whose other frames are zeros (FLF2V: the last image as the last frame), through the Wan VAE (the
  latent distribution's mode), normalised as (latent - latents_mean) * (1 / latents_std); beside it a
  mask of 4 channels (the VAE's temporal factor) per latent frame: pixel frame 0 counted 4 times, then
  one per pixel frame, 1 for the given frames, 0 elsewhere; condition = cat(mask, latents) on channels;
- every step feeds cat(latents, condition) on channels (4 + 4 + 4 = 12 here, 16 + 4 + 16 = 36 in the
  real checkpoints) with the same image tokens in both guidance passes.

Writes tests/data/fixtures/wan_i2v_pipeline/:
  first.png, last.png  RGB 32 x 48 (the video's size; CLIP resizes them to 42 x 63 and crops 42 x 42)
  inputs.safetensors   prompt_embeds, negative_prompt_embeds (1, 512, 16: 8 and 6 tokens, then zeros, as
                       encode_prompt pads them), latents (1, 4, 3, 6, 4)
  <case>/pipeline/     WanImageToVideoPipeline.save_pretrained: transformer/ (WanTransformer3DModel, the
                       wan_pipeline_tiny widths with in_channels 12, image_dim 32, added_kv_proj_dim 24),
                       vae/ (wan_pipeline_tiny's), image_encoder/ (clip_vision_tiny's model),
                       image_processor/ (shortest edge 42, crop 42 x 42), scheduler/ (UniPC, flow_shift 3.0)
  <case>/expected.safetensors  image_embeds (encode_image's output), condition (prepare_latents'), latents
                       (the final latents, before the VAE's denormalisation)
  <case>/case.json     frames, height, width, steps, guidance
Cases: first (I2V, the first image), first_last (FLF2V: pos_embed_seq_len 20, both images) and
skyreels_first (SkyReels-V2 I2V, the first image; its image_encoder/ clip_vision_tiny's tower with a seeded
visual_projection, which the pipeline does not read: it takes hidden states).

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/wan_i2v_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from PIL import Image
from diffusers import (AutoencoderKLWan, SkyReelsV2ImageToVideoPipeline, SkyReelsV2Transformer3DModel,
                       UniPCMultistepScheduler, WanImageToVideoPipeline, WanTransformer3DModel)
from safetensors.torch import load_file, save_file
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel, CLIPVisionModelWithProjection

from flux_pipeline import reinitialise

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/fixtures"
OUT = FIXTURES / "wan_i2v_pipeline"
FRAMES, HEIGHT, WIDTH = 9, 48, 32
STEPS = 3
GUIDANCE = 5.0
CLIP_TOKENS = 10  # 42 x 42 in patches of 14, and the class token
TEXT_TOKENS = 512  # encode_prompt's max_sequence_length
WIDTHS = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=12, out_channels=4,
              text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
              qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=32, image_dim=32, added_kv_proj_dim=24)


def padded(embeds):
    """The prompt's tokens and zeros to 512, as encode_prompt pads UMT5's output: the transformer's
    cross-attention takes the last 512 tokens of its context as the text and the ones before as the image's,
    so the pipeline's text must be 512 tokens long for the image tokens to be read as such."""
    return torch.cat([embeds, embeds.new_zeros(1, TEXT_TOKENS - embeds.shape[1], embeds.shape[2])], dim=1)


def image_encoder(with_projection=False):
    folder = FIXTURES / "clip_vision_tiny"
    config = json.loads((folder / "config.json").read_text())
    config = CLIPVisionConfig(**{k: v for k, v in config.items() if k != "architectures"}, projection_dim=16)
    model = CLIPVisionModelWithProjection(config) if with_projection else CLIPVisionModel(config)
    # Stored under the hub's `vision_model.` prefix, which CLIPVisionModel's module names no longer carry.
    weights = load_file(folder / "weights.safetensors")
    if with_projection:
        projection = torch.randn(16, 32, generator=torch.Generator().manual_seed(56)) / 32 ** 0.5
        weights["visual_projection.weight"] = projection
    else:
        weights = {k.removeprefix("vision_model."): v for k, v in weights.items()}
    model.load_state_dict(weights)
    return model.eval()


def run(pipe, first, last, inputs):
    seen = {}
    encode_image, prepare_latents = pipe.encode_image, pipe.prepare_latents

    def encode_recorded(*args, **kwargs):
        seen["image_embeds"] = encode_image(*args, **kwargs).clone()
        return seen["image_embeds"]

    def prepare_recorded(*args, **kwargs):
        out = prepare_latents(*args, **kwargs)
        seen["condition"] = out[1].clone()
        return out

    pipe.encode_image, pipe.prepare_latents = encode_recorded, prepare_recorded
    with torch.no_grad():
        final = pipe(image=first, last_image=last, prompt_embeds=inputs["prompt_embeds"],
                     negative_prompt_embeds=inputs["negative_prompt_embeds"], latents=inputs["latents"],
                     height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS,
                     guidance_scale=GUIDANCE, output_type="latent").frames
    return {"latents": final.contiguous(), **{k: v.contiguous() for k, v in seen.items()}}


def shared_parts(seed):
    """What this module's pipelines and wan22_experts_pipeline.py's share: wan_pipeline_tiny's VAE, UniPC at
    flow shift 3.0, and the embeddings and initial latents drawn from `seed`."""
    vae = AutoencoderKLWan.from_pretrained(FIXTURES / "wan_pipeline_tiny/pipeline/vae")
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                        num_train_timesteps=1000, flow_shift=3.0)
    g = torch.Generator().manual_seed(seed)
    inputs = {"prompt_embeds": padded(0.5 * torch.randn(1, 8, 16, generator=g)),
              "negative_prompt_embeds": padded(0.5 * torch.randn(1, 6, 16, generator=g)),
              "latents": torch.randn(1, 4, (FRAMES - 1) // 4 + 1, HEIGHT // 8, WIDTH // 8, generator=g)}
    return vae, scheduler, inputs, g


def main():
    torch.manual_seed(0)
    vae, scheduler, inputs, g = shared_parts(53)
    processor = CLIPImageProcessor(size={"shortest_edge": 42}, crop_size={"height": 42, "width": 42})

    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for name in ("first", "last"):
        shutil.copy(FIXTURES / "skyreels_df_i2v" / f"{name}.png", OUT / f"{name}.png")
    first, last = Image.open(OUT / "first.png").convert("RGB"), Image.open(OUT / "last.png").convert("RGB")
    save_file(inputs, OUT / "inputs.safetensors")

    for case, seed, flf2v in (("first", 54, False), ("first_last", 55, True), ("skyreels_first", 57, False)):
        skyreels = case.startswith("skyreels")
        transformer = reinitialise(SkyReelsV2Transformer3DModel(**WIDTHS) if skyreels else WanTransformer3DModel(
            **WIDTHS, pos_embed_seq_len=2 * CLIP_TOKENS if flf2v else None), seed)
        if flf2v:  # a position table at the scale of the image tokens, so that leaving it out shows
            with torch.no_grad():
                transformer.condition_embedder.image_embedder.pos_embed.copy_(
                    0.5 * torch.randn(1, 2 * CLIP_TOKENS, 32, generator=g))
        pipeline = SkyReelsV2ImageToVideoPipeline if skyreels else WanImageToVideoPipeline
        pipe = pipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=scheduler, image_processor=processor,
                        image_encoder=image_encoder(with_projection=skyreels), transformer=transformer)
        expected = run(pipe, first, last if flf2v else None, inputs)
        pipe.save_pretrained(OUT / case / "pipeline", safe_serialization=True)
        save_file(expected, OUT / case / "expected.safetensors")
        (OUT / case / "case.json").write_text(json.dumps({"frames": FRAMES, "height": HEIGHT, "width": WIDTH,
                                                          "steps": STEPS, "guidance": GUIDANCE}, indent=2) + "\n")
        print(case, {k: tuple(v.shape) for k, v in expected.items()}, float(expected["latents"].abs().max()))


if __name__ == "__main__":
    main()
