#!/usr/bin/env python3
"""GGUF checkpoints of Wan 2.1, Qwen-Image and LTX-Video in the tensor names people download them in.

ComfyUI-GGUF and stable-diffusion.cpp convert the original releases' single files, so a GGUF holds the
original names (Wan: patch_embedding, blocks.N.self_attn.q, ffn.0, head.head, ...; LTX-Video:
patchify_proj, adaln_single, q_norm; Qwen-Image was released in diffusers names, so only the prefix
differs), sometimes behind stable-diffusion.cpp's "model.diffusion_model." prefix. The original names
are made here from diffusers' by the inverse tables below, and each is checked by running diffusers'
own single-file conversion (diffusers.loaders.single_file_utils) on them: it must give back every
diffusers key with the same tensor, so the names written are the ones diffusers reads.

Writes tests/data/fixtures/gguf/, for FAMILY in wan, qwenimage, ltx:
  FAMILY_tiny_q8_0.gguf     tests/data/fixtures/FAMILY_tiny's weights; every 2-D weight whose rows are
                            whole 32-blocks as Q8_0, the rest F32 (run with FAMILY_tiny's config.json)
  FAMILY_wide_q4_k.gguf     FAMILY_tiny's config widened to inner width 256 (Wan and Qwen-Image 2 heads
                            x 128, LTX-Video 4 x 64: the widths the built-in configs assume), 1 block,
                            weights seeded N(0, 0.05^2); 2-D weights with 256-multiple rows as Q4_K
                            (gguf_fixtures.quantize_q4_k), the rest F32 (LTX-Video's scale_shift_tables
                            too, which ComfyUI-GGUF keeps F32); read without a config
  FAMILY_*_expected.safetensors
                            `sample`: diffusers' model on FAMILY_tiny's inputs with the dequantised
                            weights; `sample_f32`: the same model on the weights before quantisation
  wan_flf2v_tiny_q8_0.gguf  tests/data/fixtures/wan_flf2v_tiny's weights (Wan 2.1 FLF2V: img_emb.proj.*,
                            img_emb.emb_pos, cross_attn.k_img/v_img/norm_k_img) as FAMILY_tiny_q8_0, with
                            the prefix; its expected file as theirs (run with wan_flf2v_tiny's config)
Layouts: wan_tiny without prefix, its 5-D patch_embedding as ComfyUI-GGUF's fix_5d_tensors writes it
(F32, 5 dims); wan_wide with the prefix and patch_embedding folded to 4 dims (out * in, t, h, w) as
stable-diffusion.cpp's Conv3d stores it; qwenimage_tiny and ltx_wide with the prefix, the others without.

  OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/gguf_family_fixtures.py
  (gguf 0.19.0, torch 2.15.0, diffusers 0.42.1)
"""
import json
import os

import gguf
import torch
from diffusers import LTXVideoTransformer3DModel, QwenImageTransformer2DModel, WanTransformer3DModel
from diffusers.loaders import single_file_utils as sfu
from safetensors.torch import load_file, save_file

from gguf_fixtures import OUT, ROOT, Q, quantised, quantize_q4_k, write_gguf

PREFIX = "model.diffusion_model."

# diffusers substring -> original substring, applied in order (the inverse of diffusers' tables); the
# image conditioning's names (I2V, FLF2V) first, before ".norm2." would rename the image embedder's.
WAN = [("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
       ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
       ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
       ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
       ("condition_embedder.image_embedder.pos_embed", "img_emb.emb_pos"),
       (".add_k_proj.", ".k_img."), (".add_v_proj.", ".v_img."), (".norm_added_k.", ".norm_k_img."),
       ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
       ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
       ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
       ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
       ("condition_embedder.time_proj", "time_projection.1"),
       (".attn1.", ".self_attn."), (".attn2.", ".cross_attn."),
       (".to_q.", ".q."), (".to_k.", ".k."), (".to_v.", ".v."), (".to_out.0.", ".o."),
       (".norm2.", ".norm3."), ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2")]
LTX = [("proj_in", "patchify_proj"), ("time_embed", "adaln_single"), ("norm_q", "q_norm"), ("norm_k", "k_norm")]


def wan_original(name):
    if name == "scale_shift_table":
        return "head.modulation"
    if name.startswith("proj_out."):
        return "head.head." + name.split(".")[-1]
    if name.endswith(".scale_shift_table"):
        return name.replace(".scale_shift_table", ".modulation")
    for a, b in WAN:
        name = name.replace(a, b)
    return name


def wan_to_diffusers(state):
    """diffusers' single-file conversion, and FLF2V's img_emb.emb_pos, which it leaves out, named as
    diffusers' Wan conversion script names it."""
    converted = sfu.convert_wan_transformer_to_diffusers(state)
    if "img_emb.emb_pos" in converted:
        converted["condition_embedder.image_embedder.pos_embed"] = converted.pop("img_emb.emb_pos")
    return converted


def ltx_original(name):
    for a, b in LTX:
        name = name.replace(a, b)
    return name


FAMILIES = {
    # model class, diffusers' single-file conversion, diffusers name -> original name, call convention
    "wan": (WanTransformer3DModel, wan_to_diffusers, wan_original,
            lambda inputs: dict(inputs)),
    "qwenimage": (QwenImageTransformer2DModel, lambda sd: {k.replace(PREFIX, ""): v for k, v in sd.items()},
                  lambda name: name,
                  lambda inputs: dict(inputs, img_shapes=[[tuple(s) for s in item] for item in
                                                          inputs["img_shapes"].tolist()])),
    "ltx": (LTXVideoTransformer3DModel, sfu.convert_ltx_transformer_checkpoint_to_diffusers, ltx_original,
            lambda inputs: dict(inputs, num_frames=int(inputs["num_frames"]), height=int(inputs["height"]),
                                width=int(inputs["width"]),
                                rope_interpolation_scale=tuple(float(x) for x in inputs["rope_interpolation_scale"]))),
}
# general.architecture as ComfyUI-GGUF names these families
ARCH = {"wan": "wan", "qwenimage": "qwen_image", "ltx": "ltxv"}
WIDE = {"wan": dict(attention_head_dim=128, num_attention_heads=2, ffn_dim=512, num_layers=1),
        "qwenimage": dict(attention_head_dim=128, num_attention_heads=2, axes_dims_rope=[16, 56, 56], num_layers=1),
        "ltx": dict(attention_head_dim=64, num_attention_heads=4, cross_attention_dim=256, num_layers=1)}


def original_names(family, state, prefix):
    """diffusers keys -> the original ones, checked against diffusers' own conversion back."""
    _, convert, to_original, _ = FAMILIES[family]
    original = {prefix + to_original(k): v for k, v in state.items()}
    back = convert(dict(original))
    assert set(back) == set(state), f"{family}: {sorted(set(back) ^ set(state))}"
    assert all(back[k] is state[k] for k in state)
    return original


def run(model_class, config, state, call):
    model = model_class(**config)
    model.load_state_dict(state)
    model.eval()
    with torch.no_grad():
        return model(**call, return_dict=False)[0].contiguous()


def fixture(family, tag, config, state, inputs, qtype, quantize, prefix, fold_patch=False):
    model_class, convert, _, call = FAMILIES[family]
    original = original_names(family, state, prefix)
    tensors, values = quantised(original, qtype, quantize)
    patch = prefix + "patch_embedding.weight"
    if fold_patch:  # stable-diffusion.cpp's Conv3d: (out * in, t, h, w), the same bytes
        x, _ = tensors[patch]
        tensors[patch] = (x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]), Q.F32)
    write_gguf(os.path.join(OUT, f"{tag}.gguf"), tensors, arch=ARCH[family])
    dequantised = convert(dict(values))
    sample = run(model_class, config, dequantised, call(inputs))
    sample_f32 = run(model_class, config, state, call(inputs))
    save_file({"sample": sample, "sample_f32": sample_f32}, os.path.join(OUT, f"{tag}_expected.safetensors"))
    err = (sample - sample_f32).abs().max().item()
    span = (sample_f32.max() - sample_f32.min()).item()
    count = sum(q == qtype for _, q in tensors.values())
    print(f"{tag}: {count} tensors in {qtype.name}; max |quantised - f32| = {err:.3g} ({err / span:.3g} of the range)")
    return sample_f32


def main():
    torch.set_num_threads(1)
    tiny_reference = {"wan": ("expected", "sample"), "qwenimage": ("intermediates", "proj_out"),
                      "ltx": ("intermediates", "proj_out")}
    for family in FAMILIES:
        source = os.path.join(ROOT, f"{family}_tiny")
        with open(os.path.join(source, "config.json")) as f:
            config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
        state = load_file(os.path.join(source, "weights.safetensors"))
        inputs = load_file(os.path.join(source, "inputs.safetensors"))
        sample_f32 = fixture(family, f"{family}_tiny_q8_0", config, state, inputs, Q.Q8_0,
                             lambda x: gguf.quantize(x, Q.Q8_0), PREFIX if family == "qwenimage" else "")
        # the call convention above reproduces the tiny fixture's own output
        file, key = tiny_reference[family]
        reference = load_file(os.path.join(source, f"{file}.safetensors"))[key]
        assert (sample_f32 - reference).abs().max().item() < 1e-5, family

        wide = dict(config, **WIDE[family])
        torch.manual_seed(18)
        model = FAMILIES[family][0](**wide)
        with torch.no_grad():  # diffusers zero-initialises some layers; random values exercise every weight
            for p in model.parameters():
                p.copy_(torch.randn_like(p) * 0.05)
        wide_state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        fixture(family, f"{family}_wide_q4_k", wide, wide_state, inputs, Q.Q4_K, quantize_q4_k,
                PREFIX if family in ("wan", "ltx") else "", fold_patch=family == "wan")

    # Wan 2.1's image conditioning (FLF2V: I2V's tensors and the first and last image's emb_pos)
    source = os.path.join(ROOT, "wan_flf2v_tiny")
    with open(os.path.join(source, "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    state = load_file(os.path.join(source, "weights.safetensors"))
    inputs = load_file(os.path.join(source, "inputs.safetensors"))
    sample_f32 = fixture("wan", "wan_flf2v_tiny_q8_0", config, state, inputs, Q.Q8_0,
                         lambda x: gguf.quantize(x, Q.Q8_0), PREFIX)
    reference = load_file(os.path.join(source, "expected.safetensors"))["sample"]
    assert (sample_f32 - reference).abs().max().item() < 1e-5, "wan_flf2v"


if __name__ == "__main__":
    main()
