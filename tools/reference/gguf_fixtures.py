#!/usr/bin/env python3
"""GGUF fixtures: quantised blocks with their dequantised values, and tiny FLUX.1 GGUF checkpoints.

Writes tests/data/fixtures/gguf/:
  blocks.gguf, blocks_dequantised.safetensors
      one (4, 512) tensor per format (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), and
      each one's values as the `gguf` package's dequantize gives them (float32). The 32-blocks come from
      gguf.quantize of seeded normal values; the K formats (which gguf cannot quantise) are seeded random
      bytes with their f16 scales set to finite values, so every code and scale bit pattern is exercised.
  flux_tiny_q8_0.gguf, flux_tiny_q8_0_expected.safetensors
      tests/data/fixtures/flux_tiny's weights in the original (BFL) layout as ComfyUI-GGUF writes them
      (fused qkv and linear1, final-norm halves (shift, scale)), every 2-D weight whose rows are whole
      32-blocks as Q8_0, the rest F32; `sample` = diffusers' FluxTransformer2DModel on flux_tiny's inputs
      with the dequantised weights, and `sample_f32` = the fixture's own sample, for the quantisation error.
  flux_wide_q4_k.gguf, flux_wide_q4_k_expected.safetensors, flux_wide_q4_k_inputs.safetensors, flux_wide_config.json
      a FLUX.1 of 2 heads x 128 (so rows are whole 256-blocks), 1 double and 1 single block, seeded random
      weights, its 2-D weights with 256-multiple rows as Q4_K (a plain min/scale quantiser written here),
      `sample` from the dequantised weights and `sample_f32` from the f32 weights, on seeded inputs.

Also writes fuzz/corpus_gguf/: small seed files for fuzz/fuzz_gguf.cpp (every block format, metadata
values of each kind, an alignment of 64).

  /work/venv/bin/python tools/reference/gguf_fixtures.py   (gguf 0.19.0, torch 2.15.0, diffusers 0.42.1)
"""
import json
import os

import gguf
import numpy as np
import torch
from diffusers import FluxTransformer2DModel
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "fixtures")
OUT = os.path.join(ROOT, "gguf")
Q = gguf.GGMLQuantizationType


def k_blocks(qtype, rows, cols, rng):
    """Random K-format blocks with finite, moderate f16 scales (d and dmin)."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(rows * cols // block_size, type_size), dtype=np.uint8)
    scale = (rng.random(size=(blocks.shape[0], 2)) * 0.01).astype(np.float16).view(np.uint8)
    if qtype == Q.Q6_K:
        blocks[:, type_size - 2:] = scale[:, :2]  # d is last
    else:
        blocks[:, 0:4] = scale  # d, dmin first
    return blocks.reshape(rows, -1)


def quantize_q4_k(x):
    """A valid Q4_K encoding of x (rows, cols): per 32-value sub-block a 6-bit scale and min relative to
    the super-block's f16 d and dmin (not ggml's search for the best scales; any valid encoding serves)."""
    rows, cols = x.shape
    sub = x.reshape(-1, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(-1), 0)
    scale = (sub.max(-1) - lo) / 15
    mins = -lo
    d = (scale.max(-1) / 63).astype(np.float16)
    dmin = (mins.max(-1) / 63).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.round(scale / d.astype(np.float32)[:, None]), 0).clip(0, 63).astype(np.uint8)
        mn = np.where(dmin[:, None] > 0, np.round(mins / dmin.astype(np.float32)[:, None]), 0)
        mn = mn.clip(0, 63).astype(np.uint8)
        eff_scale = d.astype(np.float32)[:, None] * sc
        eff_min = dmin.astype(np.float32)[:, None] * mn
        q = np.where(eff_scale[..., None] > 0, np.round((sub + eff_min[..., None]) / eff_scale[..., None]), 0)
    q = q.clip(0, 15).astype(np.uint8)
    packed = np.empty((sub.shape[0], 12), dtype=np.uint8)
    packed[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((mn[:, 4:8] & 0x0F) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(-1, 128)
    blocks = np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8), packed, qs], axis=1)
    return blocks.reshape(rows, -1)


def write_gguf(path, tensors, alignment=None, metadata=None, arch="flux"):
    """tensors: name -> (array, qtype); quantised arrays are (rows, row_bytes) uint8."""
    w = gguf.GGUFWriter(path, arch)
    if alignment:
        w.add_custom_alignment(alignment)
    for add in metadata or []:
        add(w)
    for name, (array, qtype) in tensors.items():
        w.add_tensor(name, array, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def blocks_fixture():
    rng = np.random.default_rng(18)
    rows, cols = 4, 512
    tensors, values = {}, {}
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    tensors["f32"] = (x, Q.F32)
    tensors["f16"] = (x.astype(np.float16), Q.F16)
    tensors["bf16"] = (gguf.quantize(x, Q.BF16), Q.BF16)
    for qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        tensors[qtype.name.lower()] = (gguf.quantize(x, qtype), qtype)
    for qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        tensors[qtype.name.lower()] = (k_blocks(qtype, rows, cols, rng), qtype)
    tensors["q4_k_of_x"] = (quantize_q4_k(x), Q.Q4_K)
    for name, (array, qtype) in tensors.items():
        values[name] = torch.from_numpy(np.ascontiguousarray(gguf.dequantize(array, qtype).reshape(rows, cols)))
    err = (values["q4_k_of_x"] - torch.from_numpy(x)).abs().max().item()
    assert err < 0.5, f"the Q4_K quantiser is wrong: max error {err}"
    write_gguf(os.path.join(OUT, "blocks.gguf"), tensors)
    save_file(values, os.path.join(OUT, "blocks_dequantised.safetensors"))


# diffusers name stem -> original (BFL) stem, for tensors that only change name.
RENAMES = {
    "x_embedder": "img_in", "context_embedder": "txt_in",
    "time_text_embed.timestep_embedder.linear_1": "time_in.in_layer",
    "time_text_embed.timestep_embedder.linear_2": "time_in.out_layer",
    "time_text_embed.text_embedder.linear_1": "vector_in.in_layer",
    "time_text_embed.text_embedder.linear_2": "vector_in.out_layer",
    "time_text_embed.guidance_embedder.linear_1": "guidance_in.in_layer",
    "time_text_embed.guidance_embedder.linear_2": "guidance_in.out_layer",
    "proj_out": "final_layer.linear",
}
DOUBLE = {
    "norm1.linear": "img_mod.lin", "norm1_context.linear": "txt_mod.lin",
    "attn.norm_q": "img_attn.norm.query_norm", "attn.norm_k": "img_attn.norm.key_norm",
    "attn.norm_added_q": "txt_attn.norm.query_norm", "attn.norm_added_k": "txt_attn.norm.key_norm",
    "attn.to_out.0": "img_attn.proj", "attn.to_add_out": "txt_attn.proj",
    "ff.net.0.proj": "img_mlp.0", "ff.net.2": "img_mlp.2",
    "ff_context.net.0.proj": "txt_mlp.0", "ff_context.net.2": "txt_mlp.2",
}
SINGLE = {"proj_out": "linear2", "norm.linear": "modulation.lin", "attn.norm_q": "norm.query_norm",
          "attn.norm_k": "norm.key_norm"}


def to_original(state, config, names_only=False):
    """diffusers keys -> the original single-file layout (the inverse of cpdit's to_diffusers_layout)."""
    cat = (lambda parts: list(parts)) if names_only else torch.cat
    out = {}
    for i in range(config["num_layers"]):
        p = f"transformer_blocks.{i}."
        for s in ("weight", "bias"):
            out[f"double_blocks.{i}.img_attn.qkv.{s}"] = cat([state.pop(p + f"attn.to_{c}.{s}") for c in "qkv"])
            out[f"double_blocks.{i}.txt_attn.qkv.{s}"] = cat(
                [state.pop(p + f"attn.add_{c}_proj.{s}") for c in "qkv"])
    for i in range(config["num_single_layers"]):
        p = f"single_transformer_blocks.{i}."
        for s in ("weight", "bias"):
            out[f"single_blocks.{i}.linear1.{s}"] = cat(
                [state.pop(p + f"attn.to_{c}.{s}") for c in "qkv"] + [state.pop(p + f"proj_mlp.{s}")])
    for s in ("weight", "bias"):
        t = state.pop(f"norm_out.linear.{s}")
        out[f"final_layer.adaLN_modulation.1.{s}"] = t if names_only else torch.cat(list(t.chunk(2))[::-1])
    for name, t in state.items():
        stem, suffix = name.rsplit(".", 1)
        if suffix == "weight" and (stem.endswith("norm_q") or "norm_k" in stem or "norm_added" in stem):
            suffix = "scale"
        for table, head, new_head in ((DOUBLE, "transformer_blocks.", "double_blocks."),
                                      (SINGLE, "single_transformer_blocks.", "single_blocks.")):
            if stem.startswith(head):
                index, rest = stem[len(head):].split(".", 1)
                stem = new_head + index + "." + table[rest]
                break
        else:
            stem = RENAMES[stem]
        out[stem + "." + suffix] = t
    return out


def quantised(tensors_by_name, qtype, quantize):
    """GGUF tensors (2-D weights whose rows are whole blocks quantised, the rest F32) and their values
    as the `gguf` package dequantises them."""
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    tensors, values = {}, {}
    for name, t in tensors_by_name.items():
        x = t.float().numpy()
        if x.ndim == 2 and x.shape[1] % block == 0:
            blocks = quantize(x)
            tensors[name] = (blocks, qtype)
            values[name] = torch.from_numpy(gguf.dequantize(blocks, qtype).reshape(x.shape).copy())
        else:
            tensors[name] = (x, Q.F32)
            values[name] = t.float()
    return tensors, values


def quantised_checkpoint(state, config, qtype, quantize):
    """The original-layout GGUF tensors (2-D weights with whole blocks quantised) and the dequantised
    diffusers state dict that gives the same model."""
    tensors, dequantised = quantised(to_original(dict(state), config), qtype, quantize)
    return tensors, back_to_diffusers(dequantised, state, config)


def back_to_diffusers(original, like, config):
    """Original-layout values -> diffusers keys: to_original run on each tensor's name, undone."""
    dim = config["num_attention_heads"] * config["attention_head_dim"]
    out = {}
    single = {k: (v,) for k, v in to_original({k: k for k in like}, config, names_only=True).items()}
    for oname, dname in single.items():
        dname = dname[0]
        t = original[oname]
        if isinstance(dname, list):  # fused rows: cut back in order
            at = 0
            for k in dname:
                n = like[k].shape[0]
                out[k] = t[at:at + n].clone()
                at += n
        elif oname.startswith("final_layer.adaLN_modulation"):
            shift, scale = t.chunk(2)
            out[dname] = torch.cat([scale, shift])
        else:
            out[dname] = t.clone()
    assert set(out) == set(like) and all(out[k].shape == like[k].shape for k in like)
    return out


def flux_fixture(tag, config, state, inputs, qtype, quantize, f32_sample):
    tensors, dequantised = quantised_checkpoint(state, config, qtype, quantize)
    write_gguf(os.path.join(OUT, f"{tag}.gguf"), tensors)
    model = FluxTransformer2DModel(**config)
    model.load_state_dict(dequantised)
    model.eval()
    with torch.no_grad():
        sample = model(**inputs, return_dict=False)[0]
    save_file({"sample": sample.contiguous(), "sample_f32": f32_sample.contiguous()},
              os.path.join(OUT, f"{tag}_expected.safetensors"))
    err = (sample - f32_sample).abs().max().item()
    span = (f32_sample.max() - f32_sample.min()).item()
    print(f"{tag}: max |quantised - f32| = {err:.3g} ({err / span:.3g} of the range {span:.3g})")


def fuzz_seeds():
    out = os.path.join(ROOT, "..", "..", "..", "fuzz", "corpus_gguf")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20)
    x = rng.standard_normal((2, 32)).astype(np.float32)
    small = {"f32": (x, Q.F32), "f16": (x.astype(np.float16), Q.F16)}
    for qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        small[qtype.name.lower()] = (gguf.quantize(x, qtype), qtype)
    write_gguf(os.path.join(out, "blocks32.gguf"), small)
    write_gguf(os.path.join(out, "blocks256.gguf"), {q.name.lower(): (k_blocks(q, 1, 256, rng), q)
                                                      for q in (Q.Q4_K, Q.Q5_K, Q.Q6_K)})
    write_gguf(os.path.join(out, "metadata.gguf"), {"t": (x[:1], Q.F32)}, alignment=64, metadata=[
        lambda w: w.add_name("tiny"), lambda w: w.add_uint32("u", 7), lambda w: w.add_int8("i", -3),
        lambda w: w.add_float64("f", 0.5), lambda w: w.add_bool("b", True),
        lambda w: w.add_array("a", [1, 2, 3]), lambda w: w.add_array("s", ["x", "yz"])])
    write_gguf(os.path.join(out, "empty.gguf"), {})


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    fuzz_seeds()
    blocks_fixture()

    source = os.path.join(ROOT, "flux_tiny")
    with open(os.path.join(source, "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    state = load_file(os.path.join(source, "weights.safetensors"))
    inputs = load_file(os.path.join(source, "inputs.safetensors"))
    expected = load_file(os.path.join(source, "expected.safetensors"))["sample"]
    flux_fixture("flux_tiny_q8_0", config, state, inputs, Q.Q8_0, lambda x: gguf.quantize(x, Q.Q8_0), expected)

    wide = dict(config, attention_head_dim=128, num_attention_heads=2, joint_attention_dim=256,
                pooled_projection_dim=256, in_channels=256, axes_dims_rope=[16, 56, 56])
    torch.manual_seed(18)
    model = FluxTransformer2DModel(**wide)
    with torch.no_grad():  # diffusers zero-initialises some layers; random values exercise every weight
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.05)
    model.eval()
    g = torch.Generator().manual_seed(19)
    wide_inputs = {
        "hidden_states": torch.randn(1, 16, 256, generator=g),
        "encoder_hidden_states": torch.randn(1, 8, 256, generator=g),
        "pooled_projections": torch.randn(1, 256, generator=g),
        "timestep": torch.tensor([0.7]),
        "img_ids": inputs["img_ids"],
        "txt_ids": inputs["txt_ids"],
    }
    with torch.no_grad():
        f32_sample = model(**wide_inputs, return_dict=False)[0]
    wide_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    flux_fixture("flux_wide_q4_k", wide, wide_state, wide_inputs, Q.Q4_K, quantize_q4_k, f32_sample)
    save_file({k: v.contiguous() for k, v in wide_inputs.items()},
              os.path.join(OUT, "flux_wide_q4_k_inputs.safetensors"))
    with open(os.path.join(OUT, "flux_wide_config.json"), "w") as f:
        json.dump(dict(wide, _class_name="FluxTransformer2DModel"), f, indent=2)


if __name__ == "__main__":
    main()
