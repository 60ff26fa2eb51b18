#!/usr/bin/env python3
"""FLUX.1's original (Black Forest Labs) single-file layout, converted by diffusers' own converter.

A seeded random checkpoint of the flux_tiny config in the original layout, keys prefixed
`model.diffusion_model.` as ComfyUI-style single files have them, goes through diffusers'
`convert_flux_transformer_checkpoint_to_diffusers` (what `FluxTransformer2DModel.from_single_file`
runs). The converter hard-codes FLUX.1's width (`inner_dim = 3072`) to split the fused q/k/v/MLP
rows of the single blocks; the script runs the converter's own source with that one constant set
to the tiny width (checked to occur exactly once). It then checks that the converter consumed
every original key and that the result loads strictly into the flux_tiny config, and runs the
model on flux_tiny's inputs. Writes tests/data/fixtures/flux_original_tiny/:
  original.safetensors   the original layout (float32)
  converted.safetensors  diffusers' conversion of it (diffusers key names)
  expected.safetensors   `sample` of the converted model on flux_tiny/inputs.safetensors

  /work/venv/bin/python tools/reference/flux_original_layout.py   (torch 2.15.0, diffusers 0.42.1)
"""
import inspect
import json
import os

import torch
from diffusers import FluxTransformer2DModel
from diffusers.loaders import single_file_utils
from safetensors.torch import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "fixtures")
PREFIX = "model.diffusion_model."


def original_shapes(config):
    """Key -> shape of the original layout for a diffusers FLUX config (no guidance embedding)."""
    inner = config["num_attention_heads"] * config["attention_head_dim"]
    head = config["attention_head_dim"]
    mlp = 4 * inner
    out = config["patch_size"] ** 2 * (config["out_channels"] or config["in_channels"])
    shapes = {}

    def linear(name, rows, cols):
        shapes[name + ".weight"] = (rows, cols)
        shapes[name + ".bias"] = (rows,)

    linear("img_in", inner, config["in_channels"])
    linear("txt_in", inner, config["joint_attention_dim"])
    linear("time_in.in_layer", inner, 256)
    linear("time_in.out_layer", inner, inner)
    linear("vector_in.in_layer", inner, config["pooled_projection_dim"])
    linear("vector_in.out_layer", inner, inner)
    for i in range(config["num_layers"]):
        b = f"double_blocks.{i}."
        for stream in ("img", "txt"):
            linear(b + f"{stream}_mod.lin", 6 * inner, inner)
            linear(b + f"{stream}_attn.qkv", 3 * inner, inner)
            shapes[b + f"{stream}_attn.norm.query_norm.scale"] = (head,)
            shapes[b + f"{stream}_attn.norm.key_norm.scale"] = (head,)
            linear(b + f"{stream}_attn.proj", inner, inner)
            linear(b + f"{stream}_mlp.0", mlp, inner)
            linear(b + f"{stream}_mlp.2", inner, mlp)
    for i in range(config["num_single_layers"]):
        b = f"single_blocks.{i}."
        linear(b + "linear1", 3 * inner + mlp, inner)
        linear(b + "linear2", inner, inner + mlp)
        shapes[b + "norm.query_norm.scale"] = (head,)
        shapes[b + "norm.key_norm.scale"] = (head,)
        linear(b + "modulation.lin", 3 * inner, inner)
    linear("final_layer.linear", out, inner)
    linear("final_layer.adaLN_modulation.1", 2 * inner, inner)
    return shapes


def converter_for_width(inner):
    """diffusers' converter, its source unchanged but for FLUX.1's hard-coded width."""
    source = inspect.getsource(single_file_utils.convert_flux_transformer_checkpoint_to_diffusers)
    assert source.count("inner_dim = 3072") == 1, "the converter changed: review this script"
    scope = dict(vars(single_file_utils))
    exec(source.replace("inner_dim = 3072", f"inner_dim = {inner}"), scope)
    return scope["convert_flux_transformer_checkpoint_to_diffusers"]


def main():
    torch.set_num_threads(1)
    source = os.path.join(ROOT, "flux_tiny")
    with open(os.path.join(source, "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    generator = torch.Generator().manual_seed(2024)
    original = {}
    for name, shape in original_shapes(config).items():
        # Norm scales near 1 and small weights keep the activations O(1), as a trained model's are.
        values = torch.randn(shape, generator=generator)
        original[PREFIX + name] = 1 + 0.1 * values if name.endswith(".scale") else 0.2 * values
    convert = converter_for_width(config["num_attention_heads"] * config["attention_head_dim"])
    remaining = {k: v.clone() for k, v in original.items()}
    converted = convert(remaining)
    assert not remaining, f"the converter left keys unused: {sorted(remaining)}"
    model = FluxTransformer2DModel(**config)
    model.load_state_dict(converted, strict=True)
    model.eval()
    inputs = load_file(os.path.join(source, "inputs.safetensors"))
    with torch.no_grad():
        sample = model(**inputs, return_dict=False)[0]
    target = os.path.join(ROOT, "flux_original_tiny")
    os.makedirs(target, exist_ok=True)
    save_file(original, os.path.join(target, "original.safetensors"))
    save_file({k: v.contiguous() for k, v in converted.items()}, os.path.join(target, "converted.safetensors"))
    save_file({"sample": sample.contiguous()}, os.path.join(target, "expected.safetensors"))
    print(f"{len(original)} original tensors -> {len(converted)} diffusers tensors; "
          f"sample {tuple(sample.shape)} max |x| {sample.abs().max().item():.3f}")


if __name__ == "__main__":
    main()
