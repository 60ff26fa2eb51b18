"""Reference for the image conditioning of the Wan 2.1 network (I2V and FLF2V): diffusers' own
SkyReelsV2Transformer3DModel and WanTransformer3DModel with image_dim and added_kv_proj_dim set.

What it exercises (diffusers 0.42.1):
- condition_embedder.image_embedder: FP32LayerNorm -> Linear -> GELU (erf) -> Linear -> FP32LayerNorm over
  encoder_hidden_states_image; with pos_embed_seq_len (FLF2V) the first and last image's tokens are viewed
  as one sequence of 2 x 257 and a learned pos_embed is added first;
- the projected image tokens concatenated before the text, and every block's cross-attention splitting
  them off again (the text is taken as the last 512 tokens, as diffusers hard-codes it), attending to
  them through add_k_proj / add_v_proj / norm_added_k with its own query, and summing the two outputs
  before to_out.

Two tiny models (the skyreels_v2_tiny widths: 2 heads of 12, text_dim 16, ffn 32, 2 layers), in_channels
36 and out_channels 16 as the I2V checkpoints have them, image_dim 8:
  skyreels_v2_i2v_tiny/  SkyReels-V2 under diffusion forcing (a timestep per latent frame), one image
  wan_flf2v_tiny/        Wan 2.1 with pos_embed_seq_len 514 (first and last frame), one timestep
Each folder: config.json, weights.safetensors, inputs.safetensors (forward's keyword arguments),
expected.safetensors (sample), intermediates.safetensors (outputs of sub-modules by module path; a
module returning a tuple as path.i).

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/wan_i2v_transformer.py   # torch 2.15, diffusers 0.42.1
"""
import json
import pathlib
import shutil

import torch
from diffusers import SkyReelsV2Transformer3DModel, WanTransformer3DModel
from safetensors.torch import save_file

from flux_pipeline import reinitialise

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/data/fixtures"
WIDTHS = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=36, out_channels=16,
              text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
              qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=32, image_dim=8, added_kv_proj_dim=24)
TEXT_TOKENS, IMAGE_TOKENS = 512, 257  # what the pipelines pass: UMT5 padded to 512, CLIP's 257 tokens
RECORDED = ["rope", "patch_embedding", "condition_embedder", "condition_embedder.image_embedder",
            "blocks.0.attn2", "blocks.0", "blocks.1", "norm_out", "proj_out"]


def record(model):
    seen = {}
    for name in RECORDED:
        def hook(_module, _args, out, name=name):
            if isinstance(out, tuple):
                for i, t in enumerate(out):
                    if t is not None:
                        seen[f"{name}.{i}"] = t.detach().clone().contiguous()
            else:
                seen[name] = out.detach().clone().contiguous()
        model.get_submodule(name).register_forward_hook(hook)
    return seen


def write(folder, model, inputs):
    seen = record(model)
    with torch.no_grad():
        sample = model(**inputs, return_dict=False)[0]
    out = FIXTURES / folder
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    config = {k: v for k, v in dict(model.config).items() if not k.startswith("_")}
    config = {"_class_name": type(model).__name__, **json.loads(json.dumps(config))}
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out / "weights.safetensors")
    save_file({k: (v if torch.is_tensor(v) else torch.tensor([v])).contiguous() for k, v in inputs.items()},
              out / "inputs.safetensors")
    save_file({"sample": sample.contiguous()}, out / "expected.safetensors")
    save_file(seen, out / "intermediates.safetensors")
    print(folder, tuple(sample.shape), "max |sample|", float(sample.abs().max()))
    return sample


def image_moves_sample(model, inputs, sample):
    """How much the image tokens matter: the sample with them zeroed, relative to its range."""
    zeroed = dict(inputs, encoder_hidden_states_image=torch.zeros_like(inputs["encoder_hidden_states_image"]))
    with torch.no_grad():
        other = model(**zeroed, return_dict=False)[0]
    return float((other - sample).abs().max() / sample.abs().max())


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(31)

    skyreels = reinitialise(SkyReelsV2Transformer3DModel(**WIDTHS, num_frame_per_block=1), 32)
    inputs = {"hidden_states": torch.randn(1, 36, 3, 8, 6, generator=g),
              "timestep": torch.tensor([[900, 620, 310]], dtype=torch.int64),
              "encoder_hidden_states": torch.randn(1, TEXT_TOKENS, 16, generator=g),
              "encoder_hidden_states_image": torch.randn(1, IMAGE_TOKENS, 8, generator=g),
              "enable_diffusion_forcing": torch.tensor([True])}
    sample = write("skyreels_v2_i2v_tiny", skyreels, inputs)
    print("  zeroing the image moves it by", image_moves_sample(skyreels, inputs, sample))

    wan = reinitialise(WanTransformer3DModel(**WIDTHS, pos_embed_seq_len=2 * IMAGE_TOKENS), 33)
    with torch.no_grad():  # a learned position table at the scale of the image tokens, so leaving it out shows
        wan.condition_embedder.image_embedder.pos_embed.copy_(0.5 * torch.randn(1, 2 * IMAGE_TOKENS, 8, generator=g))
    inputs = {"hidden_states": torch.randn(1, 36, 3, 8, 6, generator=g),
              "timestep": torch.tensor([700.0]),
              "encoder_hidden_states": torch.randn(1, TEXT_TOKENS, 16, generator=g),
              # the first and the last frame's CLIP tokens, as WanImageToVideoPipeline stacks them
              "encoder_hidden_states_image": torch.randn(2, IMAGE_TOKENS, 8, generator=g)}
    sample = write("wan_flf2v_tiny", wan, inputs)
    print("  zeroing the images moves it by", image_moves_sample(wan, inputs, sample))
    with torch.no_grad():
        table = wan.condition_embedder.image_embedder.pos_embed.clone()
        wan.condition_embedder.image_embedder.pos_embed.zero_()
        other = wan(**inputs, return_dict=False)[0]
        wan.condition_embedder.image_embedder.pos_embed.copy_(table)
    print("  zeroing pos_embed moves it by", float((other - sample).abs().max() / sample.abs().max()))


if __name__ == "__main__":
    main()
