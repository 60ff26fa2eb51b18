"""Reference for `cpdit generate` end to end on LTX-Video text-to-video: diffusers' own LTXPipeline on
a tiny random pipeline (T5 tokenizer and encoder, transformer, timestep-conditioned VAE, LTX-Video's
scheduler), from a prompt, with the initial latents given, 3 steps at guidance 3.0 (the default).

Writes tests/data/fixtures/ltx_pipeline_tiny/:
  pipeline/            LTXPipeline.save_pretrained: model_index.json, tokenizer/ (tokenizer_t5_v2),
                       text_encoder/ (T5EncoderModel, d_model 16, 2 layers), transformer/
                       (LTXVideoTransformer3DModel, 2 heads of 12, 8 latent channels, caption 16),
                       vae/ (AutoencoderKLLTXVideo, 0.9.1+ layout: timestep-conditioned, residual
                       upsamplers; 32x in space, 8x in time; a minimal encoder,
                       which nothing runs), scheduler/ (FlowMatchEulerDiscreteScheduler
                       with LTX-Video's scheduler_config: dynamic shift 0.95..2.05 over 1024..4096
                       tokens, shift_terminal 0.1)
  inputs.safetensors   prompt_embeds (1, 24, 16), prompt_attention_mask (1, 24) I64,
                       negative_prompt_embeds, negative_prompt_attention_mask (the prompt "" padded):
                       what encode_prompt returns; latents (1, 8, 8): the initial noise packed as the
                       pipeline's latents= takes it; decode_noise (1, 8, 2, 2, 2): the generator's
                       draw at decode (the pipeline's first, as latents= is given)
  expected.safetensors latents (1, 8, 2, 2, 2): the final latents unpacked, before the VAE's
                       latents_mean/std; video (1, 9, 64, 64, 3) f32 in [0, 1] at the pipeline's
                       default decode_timestep 0 (decode_noise_scale 0: the noise has no weight);
                       video_decode_t (the same at decode_timestep 0.05, decode_noise_scale 0.025
                       with decode_noise)
  case.json            prompt, frames, height, width, steps, guidance, frame_rate, max_sequence_length,
                       decode_timestep, decode_noise_scale

9 frames of 64x64 are 2 x 2 x 2 = 8 latent tokens: ring 3 splits them unevenly (and the 24 text
tokens evenly, 16 of the negative prompt's padding).

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/ltx_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import numpy as np
import torch
from diffusers import (AutoencoderKLLTXVideo, FlowMatchEulerDiscreteScheduler, LTXPipeline,
                       LTXVideoTransformer3DModel)
from safetensors.torch import save_file
from transformers import T5Config, T5EncoderModel, T5TokenizerFast

from encode_prompt import reinitialise as reinitialise_text
from flux_pipeline import reinitialise

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/fixtures"
OUT = FIXTURES / "ltx_pipeline_tiny"
PROMPT = "a red fox trotting through snow"
FRAMES, HEIGHT, WIDTH = 9, 64, 64
STEPS = 3
GUIDANCE = 3.0
FRAME_RATE = 25
MAX_SEQUENCE_LENGTH = 24
DECODE_TIMESTEP, DECODE_NOISE_SCALE = 0.05, 0.025  # LTX-Video 0.9.1's recommended values
DECODE_SEED = 21


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    text_encoder = reinitialise_text(T5EncoderModel(T5Config(
        vocab_size=416, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_heads=4, feed_forward_proj="gated-gelu",
        dropout_rate=0.0)), 31)
    tokenizer = T5TokenizerFast.from_pretrained(FIXTURES / "tokenizer_t5_v2")
    transformer = reinitialise(LTXVideoTransformer3DModel(
        in_channels=8, out_channels=8, patch_size=1, patch_size_t=1, num_attention_heads=2, attention_head_dim=12,
        cross_attention_dim=24, num_layers=2, caption_channels=16), 32)
    vae = AutoencoderKLLTXVideo(
        in_channels=3, out_channels=3, latent_channels=8, patch_size=4, patch_size_t=1,
        block_out_channels=(4, 4, 4), layers_per_block=(1, 1, 1, 1), spatio_temporal_scaling=(True, True, True),
        down_block_types=("LTXVideoDownBlock3D",) * 3, downsample_type=("conv",) * 3,
        decoder_block_out_channels=(8, 16, 32), decoder_layers_per_block=(1, 2, 1, 1),
        decoder_spatio_temporal_scaling=(True, True, True), decoder_inject_noise=(False,) * 4,
        upsample_residual=(True,) * 3, upsample_factor=(2,) * 3, timestep_conditioning=True, decoder_causal=False)
    reinitialise(vae, 33)
    g = torch.Generator().manual_seed(34)
    with torch.no_grad():  # the pipeline's business: random per-channel statistics, as vae_ltx.py
        vae.latents_mean.copy_(0.3 * torch.randn(8, generator=g))
        vae.latents_std.copy_(1 + 0.5 * torch.rand(8, generator=g))
        vae.decoder.timestep_scale_multiplier.fill_(1000.0)
    # LTX-Video's scheduler/scheduler_config.json.
    scheduler = FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.95, max_shift=2.05,
        base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=0.1)
    pipe = LTXPipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
                       transformer=transformer)
    assert pipe.vae_spatial_compression_ratio == 32 and pipe.vae_temporal_compression_ratio == 8

    latent_shape = (1, 8, (FRAMES - 1) // 8 + 1, HEIGHT // 32, WIDTH // 32)
    latents = LTXPipeline._pack_latents(torch.randn(latent_shape, generator=g))
    # latents= is given, so the generator's first draw is the decode noise.
    decode_noise = torch.randn(latent_shape, generator=torch.Generator().manual_seed(DECODE_SEED))

    common = dict(prompt=PROMPT, latents=latents, height=HEIGHT, width=WIDTH, num_frames=FRAMES,
                  num_inference_steps=STEPS, guidance_scale=GUIDANCE, frame_rate=FRAME_RATE,
                  max_sequence_length=MAX_SEQUENCE_LENGTH)
    with torch.no_grad():
        embeds, mask, negative, negative_mask = pipe.encode_prompt(
            PROMPT, None, do_classifier_free_guidance=True, max_sequence_length=MAX_SEQUENCE_LENGTH)
        packed = pipe(output_type="latent", **common).frames
        final = LTXPipeline._unpack_latents(packed, *latent_shape[2:])
        video = pipe(output_type="np", generator=torch.Generator().manual_seed(DECODE_SEED), **common).frames
        video_t = pipe(output_type="np", generator=torch.Generator().manual_seed(DECODE_SEED),
                       decode_timestep=DECODE_TIMESTEP, decode_noise_scale=DECODE_NOISE_SCALE, **common).frames
        # The decode noise is what the pipeline drew: decoding it by hand gives its video.
        denormalised = LTXPipeline._denormalize_latents(final, vae.latents_mean, vae.latents_std,
                                                        vae.config.scaling_factor)
        mixed = (1 - DECODE_NOISE_SCALE) * denormalised + DECODE_NOISE_SCALE * decode_noise
        by_hand = vae.decode(mixed, torch.tensor([DECODE_TIMESTEP])).sample
        by_hand = pipe.video_processor.postprocess_video(by_hand, output_type="np")
        assert np.abs(by_hand - video_t).max() < 1e-6, np.abs(by_hand - video_t).max()
    assert not mask.all() and not negative_mask.all(), "both prompts must be padded"

    if OUT.exists():
        shutil.rmtree(OUT)
    pipe.save_pretrained(OUT / "pipeline", safe_serialization=True)
    # The tokenizer as its fixture holds it (spiece.model, which cpdit reads), not the fast tokenizer's json.
    shutil.rmtree(OUT / "pipeline/tokenizer")
    shutil.copytree(FIXTURES / "tokenizer_t5_v2", OUT / "pipeline/tokenizer",
                    ignore=shutil.ignore_patterns("expected*", "prompts.json"))
    save_file({"prompt_embeds": embeds.contiguous(), "prompt_attention_mask": mask.long().contiguous(),
               "negative_prompt_embeds": negative.contiguous(),
               "negative_prompt_attention_mask": negative_mask.long().contiguous(),
               "latents": latents.contiguous(), "decode_noise": decode_noise.contiguous()},
              OUT / "inputs.safetensors")
    save_file({"latents": final.contiguous(), "video": torch.from_numpy(np.ascontiguousarray(video)).float(),
               "video_decode_t": torch.from_numpy(np.ascontiguousarray(video_t)).float()},
              OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps({
        "prompt": PROMPT, "frames": FRAMES, "height": HEIGHT, "width": WIDTH, "steps": STEPS, "guidance": GUIDANCE,
        "frame_rate": FRAME_RATE, "max_sequence_length": MAX_SEQUENCE_LENGTH, "decode_timestep": DECODE_TIMESTEP,
        "decode_noise_scale": DECODE_NOISE_SCALE}, indent=2) + "\n")
    print("video", video.shape, video.min(), video.max(), "latents", tuple(final.shape), float(final.abs().max()),
          "text tokens", int(mask.sum()), int(negative_mask.sum()))


if __name__ == "__main__":
    main()
