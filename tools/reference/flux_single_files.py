"""Reference for `cpdit generate` from single files, as ComfyUI and stable-diffusion.cpp users hold them:
diffusers' own FluxPipeline, from a prompt, on the weights those files hold.

Writes tests/data/fixtures/flux_single_files/:
  flux1-tiny.safetensors        the transformer in the original (BFL) layout under model.diffusion_model.,
                                with a guidance embedding (dev-like): 1 double + 1 single block, 2 heads of 8,
                                in_channels 64 (16 latent channels packed 2x2), text width 16;
                                diffusers' own converter (flux_original_layout.py's) makes the model run here
  transformer_config.json       {"axes_dims_rope": [2, 2, 4]}: the one value its tensors do not tell (FLUX.1's
                                are [16, 56, 56], too wide for heads of 8)
  (the VAE is single_file_tiny's ae.safetensors, FLUX.1's VAE in the BFL/LDM layout, with its diffusers
  config flux_vae_diffusers/config.json: 4 norm groups, which its shapes do not carry)
  clip_l/clip_l.safetensors     encode_prompt's CLIP text tower (bf16) in ComfyUI's layout: text_model. keys,
  clip_l/config.json            and its config beside it (its 2 heads are not in its shapes)
  t5xxl_fp8_e4m3fn.safetensors  encode_prompt's T5 encoder as ComfyUI's plain FP8 files are: every 2-D tensor
                                cast to float8_e4m3fn, 1-D in f16, the embedding as shared.weight only; its
                                config comes from its shapes
  inputs.safetensors            latents (1, 12, 64): the initial packed noise
  expected.safetensors          latents (1, 16, 8, 6): the final latents unpacked, before the VAE's scaling;
                                image (1, 64, 48, 3) float32 in [0, 1] (output_type="np")
  call.json                     prompt, height, width, steps, guidance, max_sequence_length
The reference runs in float32 on exactly the values the files hold (the FP8 and f16 ones upcast, as
transformers upcasts them); tokenizers are the repository's tokenizer_clip_v2 and tokenizer_t5_v2.

    OMP_NUM_THREADS=1 /work/refvenv/bin/python tools/reference/flux_single_files.py   # torch 2.x, diffusers 0.42.1
"""
import json
import pathlib
import shutil
import sys

import diffusers
import torch
import transformers
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
from safetensors.torch import load_file, save_file
from transformers import CLIPTextModel, CLIPTokenizer, T5EncoderModel, T5TokenizerFast

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from flux_original_layout import PREFIX, converter_for_width, original_shapes  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/fixtures"
OUT = FIXTURES / "flux_single_files"
PROMPT = "a red fox in the snow"
HEIGHT, WIDTH, STEPS, GUIDANCE, TEXT_TOKENS = 64, 48, 2, 3.5, 32
README = """# flux_single_files — FLUX.1 from the single files ComfyUI users hold

Made by `OMP_NUM_THREADS=1 python tools/reference/flux_single_files.py` ({versions}, CPU, float32); the
script's docstring lists every file. diffusers' own FluxPipeline runs from the prompt on exactly the weights
the files hold: the transformer converted from its original (BFL) layout by diffusers' converter, the FP8
T5's values upcast as stored, single_file_tiny's VAE (ae.safetensors, its config
flux_vae_diffusers/config.json), the repository's tokenizer_clip_v2 and tokenizer_t5_v2.
`expected.safetensors` holds the final latents (unpacked, before the VAE's scaling) and the decoded image
in [0, 1].
"""
CONFIG = dict(patch_size=1, in_channels=64, num_layers=1, num_single_layers=1, attention_head_dim=8,
              num_attention_heads=2, joint_attention_dim=16, pooled_projection_dim=16, guidance_embeds=True,
              axes_dims_rope=[2, 2, 4])


def transformer_files():
    """Random original-layout weights (with guidance_in) and the diffusers model converted from them."""
    inner = CONFIG["num_attention_heads"] * CONFIG["attention_head_dim"]
    shapes = original_shapes({**CONFIG, "out_channels": None})
    for layer, cols in (("in_layer", 256), ("out_layer", inner)):
        shapes[f"guidance_in.{layer}.weight"] = (inner, cols)
        shapes[f"guidance_in.{layer}.bias"] = (inner,)
    g = torch.Generator().manual_seed(4100)
    original = {}
    for name, shape in sorted(shapes.items()):
        values = torch.randn(shape, generator=g)
        original[PREFIX + name] = 1 + 0.1 * values if name.endswith(".scale") else 0.2 * values
    remaining = {k: v.clone() for k, v in original.items()}
    converted = converter_for_width(inner)(remaining)
    assert not remaining, f"the converter left keys unused: {sorted(remaining)}"
    model = FluxTransformer2DModel(**CONFIG)
    model.load_state_dict(converted, strict=True)
    return original, model.eval()


def fp8_t5(folder):
    """The T5 as a plain FP8 file holds it, and the model on exactly those values."""
    t5 = T5EncoderModel.from_pretrained(folder, torch_dtype=torch.float32).eval()
    stored = {}
    for name, p in t5.state_dict().items():
        if name == "encoder.embed_tokens.weight":
            continue  # tied to shared.weight, which the file holds
        stored[name] = p.to(torch.float8_e4m3fn) if p.dim() == 2 else p.to(torch.float16)
    with torch.no_grad():
        for name, p in t5.named_parameters():
            p.copy_(stored["shared.weight" if name == "encoder.embed_tokens.weight" else name].float())
    return stored, t5


def main():
    torch.set_num_threads(1)
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "clip_l").mkdir(parents=True)
    original, transformer = transformer_files()
    save_file(original, OUT / "flux1-tiny.safetensors")
    (OUT / "transformer_config.json").write_text(json.dumps({"axes_dims_rope": CONFIG["axes_dims_rope"]}) + "\n")

    vae = AutoencoderKL.from_pretrained(FIXTURES / "single_file_tiny/flux_vae_diffusers", torch_dtype=torch.float32)
    vae.eval()

    clip_folder = FIXTURES / "encode_prompt/flux_text_encoder"
    clip = CLIPTextModel.from_pretrained(clip_folder, torch_dtype=torch.float32).eval()
    clip_state = load_file(clip_folder / "model.safetensors")
    save_file({k if k.startswith("text_model.") else "text_model." + k: v.contiguous() for k, v in clip_state.items()},
              OUT / "clip_l/clip_l.safetensors")
    shutil.copy(clip_folder / "config.json", OUT / "clip_l/config.json")

    t5_state, t5 = fp8_t5(FIXTURES / "encode_prompt/flux_text_encoder_2")
    save_file({k: v.contiguous() for k, v in t5_state.items()}, OUT / "t5xxl_fp8_e4m3fn.safetensors")

    scheduler = FlowMatchEulerDiscreteScheduler(  # FLUX.1-dev's scheduler_config.json
        shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15, base_image_seq_len=256,
        max_image_seq_len=4096)
    pipe = FluxPipeline(scheduler=scheduler, vae=vae, text_encoder=clip,
                        tokenizer=CLIPTokenizer.from_pretrained(FIXTURES / "tokenizer_clip_v2"), text_encoder_2=t5,
                        tokenizer_2=T5TokenizerFast.from_pretrained(FIXTURES / "tokenizer_t5_v2"),
                        transformer=transformer)
    g = torch.Generator().manual_seed(4101)
    h = 2 * (HEIGHT // (pipe.vae_scale_factor * 2))
    w = 2 * (WIDTH // (pipe.vae_scale_factor * 2))
    latents = torch.randn(1, (h // 2) * (w // 2), CONFIG["in_channels"], generator=g)
    common = dict(prompt=PROMPT, latents=latents, height=HEIGHT, width=WIDTH, num_inference_steps=STEPS,
                  guidance_scale=GUIDANCE, max_sequence_length=TEXT_TOKENS)
    with torch.no_grad():
        packed = pipe(output_type="latent", **common).images
        image = pipe(output_type="np", **common).images
    final = FluxPipeline._unpack_latents(packed, HEIGHT, WIDTH, pipe.vae_scale_factor)
    save_file({"latents": latents.contiguous()}, OUT / "inputs.safetensors")
    save_file({"latents": final.contiguous(), "image": torch.from_numpy(image).contiguous()},
              OUT / "expected.safetensors")
    (OUT / "README.md").write_text(README.format(
        versions=f"diffusers {diffusers.__version__}, transformers {transformers.__version__}, torch {torch.__version__}"))
    (OUT / "call.json").write_text(json.dumps(
        {"made_by": f"tools/reference/flux_single_files.py, diffusers {diffusers.__version__}, torch {torch.__version__}",
         "prompt": PROMPT, "height": HEIGHT, "width": WIDTH, "steps": STEPS, "guidance": GUIDANCE,
         "max_sequence_length": TEXT_TOKENS}, indent=1) + "\n")
    print("latents", tuple(final.shape), float(final.abs().max()), "image", image.shape, image.min(), image.max())


if __name__ == "__main__":
    main()
