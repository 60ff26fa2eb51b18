"""Reference for `cpdit generate` end to end on FLUX.1: diffusers' own FluxPipeline on a tiny random
transformer and VAE, with the prompt embeddings and the initial (packed) noise given, 3 steps,
guidance 3.5, decoded to an image; and the same with true CFG (true_cfg_scale 2.5 on a negative prompt's
embeddings, no norm rescale in FluxPipeline).

Writes tests/data/fixtures/flux_pipeline_tiny/:
  pipeline/            FluxPipeline.save_pretrained: model_index.json, transformer/ (FluxTransformer2DModel,
                       in_channels 16, 2 heads of 16, 1 double + 1 single block, guidance embedder),
                       vae/ (AutoencoderKL, latent_channels 4, block_out_channels (8, 16): scale factor 2),
                       scheduler/ (FlowMatchEulerDiscreteScheduler as FLUX.1-dev's); no text encoders
  inputs.safetensors   prompt_embeds (1, 8, 32), pooled_prompt_embeds (1, 32), latents (1, 64, 16) packed,
                       negative_prompt_embeds (1, 8, 32), negative_pooled_prompt_embeds (1, 32)
  expected.safetensors latents (1, 4, 16, 16): the final latents unpacked, before the VAE's scaling;
                       image (1, 32, 32, 3) float32 in [0, 1] (output_type="np");
                       latents_true_cfg (1, 4, 16, 16): the final latents with true CFG
  case.json            height, width, steps, guidance, true_cfg_scale

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/flux_pipeline.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/flux_pipeline_tiny"
HEIGHT = WIDTH = 32
STEPS = 3
GUIDANCE = 3.5
TEXT_TOKENS = 8
TRUE_CFG = 2.5


def reinitialise(model, seed):
    """Every parameter random at a scale that keeps activations O(1): weights N(0, 1/fan_in), norm
    scales near 1, biases small."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if p.dim() >= 2:
                p.copy_(noise / p[0].numel() ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * noise)
            else:
                p.copy_(0.1 * noise)
    return model.eval()


def main():
    torch.manual_seed(0)
    transformer = reinitialise(FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32, guidance_embeds=True,
        axes_dims_rope=(4, 4, 8)), 1)
    vae = reinitialise(AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), layers_per_block=1,
        latent_channels=4, norm_num_groups=4, sample_size=32, scaling_factor=0.3611, shift_factor=0.1159,
        use_quant_conv=False, use_post_quant_conv=False), 2)
    scheduler = FlowMatchEulerDiscreteScheduler(
        shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15, base_image_seq_len=256,
        max_image_seq_len=4096)
    pipe = FluxPipeline(scheduler=scheduler, vae=vae, text_encoder=None, tokenizer=None, text_encoder_2=None,
                        tokenizer_2=None, transformer=transformer)

    g = torch.Generator().manual_seed(3)
    prompt_embeds = 0.5 * torch.randn(1, TEXT_TOKENS, 32, generator=g)
    pooled = torch.randn(1, 32, generator=g)
    h = 2 * (HEIGHT // (pipe.vae_scale_factor * 2))
    w = 2 * (WIDTH // (pipe.vae_scale_factor * 2))
    latents = torch.randn(1, (h // 2) * (w // 2), transformer.config.in_channels, generator=g)
    negative_embeds = 0.5 * torch.randn(1, TEXT_TOKENS, 32, generator=g)  # drawn last: the rest is unchanged
    negative_pooled = torch.randn(1, 32, generator=g)

    common = dict(prompt_embeds=prompt_embeds, pooled_prompt_embeds=pooled, latents=latents, height=HEIGHT,
                  width=WIDTH, num_inference_steps=STEPS, guidance_scale=GUIDANCE)
    with torch.no_grad():
        packed = pipe(output_type="latent", **common).images
        image = pipe(output_type="np", **common).images
        packed_cfg = pipe(output_type="latent", negative_prompt_embeds=negative_embeds,
                          negative_pooled_prompt_embeds=negative_pooled, true_cfg_scale=TRUE_CFG, **common).images
    final = FluxPipeline._unpack_latents(packed, HEIGHT, WIDTH, pipe.vae_scale_factor)
    final_cfg = FluxPipeline._unpack_latents(packed_cfg, HEIGHT, WIDTH, pipe.vae_scale_factor)

    if OUT.exists():
        shutil.rmtree(OUT)
    pipe.save_pretrained(OUT / "pipeline", safe_serialization=True)
    save_file({"prompt_embeds": prompt_embeds, "pooled_prompt_embeds": pooled, "latents": latents.contiguous(),
               "negative_prompt_embeds": negative_embeds, "negative_pooled_prompt_embeds": negative_pooled},
              OUT / "inputs.safetensors")
    save_file({"latents": final.contiguous(), "image": torch.from_numpy(image).contiguous(),
               "latents_true_cfg": final_cfg.contiguous()}, OUT / "expected.safetensors")
    (OUT / "case.json").write_text(json.dumps(
        {"height": HEIGHT, "width": WIDTH, "steps": STEPS, "guidance": GUIDANCE, "true_cfg_scale": TRUE_CFG},
        indent=2) + "\n")
    print("image", image.shape, image.min(), image.max(), "latents", tuple(final.shape), float(final.abs().max()))


if __name__ == "__main__":
    main()
