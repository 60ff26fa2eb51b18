"""Reference for CLIPVisionModel (the image encoder of Wan 2.1's image-to-video pipelines): transformers'
own model, tiny and seeded, and its own CLIPImageProcessor.

Writes tests/data/fixtures/clip_vision_tiny/:
  config.json, weights.safetensors   CLIPVisionModel: hidden 32, 3 layers of 2 heads, intermediate 48, `gelu`
                                     (Wan's ViT-H/14 image encoder's), 42 x 42 images in patches of 14 (10 tokens);
                                     weights saved with the `vision_model.` prefix, as the hub's Wan image
                                     encoders hold them; every parameter re-initialised from one seeded generator
                                     (>= 2-D randn / sqrt(fan_in), norm weights 1 + 0.1 randn, other 1-D 0.1 randn,
                                     the position table 0.5 randn)
  inputs.safetensors                 pixel_values (2, 3, 42, 42)
  expected.safetensors               hidden_states_0 .. hidden_states_3 (transformers' output_hidden_states: the
                                     input of layer 0, after pre_layrnorm, then every layer's output),
                                     last_hidden_state, pooler_output
  preprocessor_config.json, image.png, processed.safetensors
                                     CLIPImageProcessor (shortest edge 42, centre crop 42 x 42, CLIP's mean and
                                     std) and its pixel_values (1, 3, 42, 42) of the 61 x 47 PNG

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/clip_vision_tiny.py   # torch 2.15, transformers 5.24
"""
import json
import pathlib

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/clip_vision_tiny"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    config = CLIPVisionConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=2,
                              image_size=42, patch_size=14, hidden_act="gelu", layer_norm_eps=1e-5)
    model = CLIPVisionModel(config).eval()
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "position_embedding" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p[0].numel()))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    pixel_values = torch.randn(2, 3, 42, 42, generator=g)
    with torch.no_grad():
        out = model(pixel_values=pixel_values, output_hidden_states=True)
    assert len(out.hidden_states) == config.num_hidden_layers + 1
    expected = {f"hidden_states_{i}": h.contiguous() for i, h in enumerate(out.hidden_states)}
    expected["last_hidden_state"] = out.last_hidden_state.clone()
    expected["pooler_output"] = out.pooler_output.contiguous()
    save_file(expected, OUT / "expected.safetensors")
    save_file({"pixel_values": pixel_values}, OUT / "inputs.safetensors")
    save_file({"vision_model." + k: v.contiguous() for k, v in model.state_dict().items()},
              OUT / "weights.safetensors")
    (OUT / "config.json").write_text(json.dumps(
        {"architectures": ["CLIPVisionModel"], **{k: v for k, v in config.to_dict().items()
                                                   if k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                                            "num_attention_heads", "num_channels", "image_size",
                                                            "patch_size", "hidden_act", "layer_norm_eps",
                                                            "model_type")}}, indent=2, sort_keys=True) + "\n")

    rng = np.random.default_rng(12)
    y, x = np.mgrid[0:47, 0:61]
    base = np.stack([x * 255 / 61, y * 255 / 47, 128 + 60 * np.sin(x / 5.0)], -1)
    Image.fromarray(np.clip(base + rng.normal(0, 30, base.shape), 0, 255).astype(np.uint8), "RGB").save(OUT / "image.png")
    processor = CLIPImageProcessor(size={"shortest_edge": 42}, crop_size={"height": 42, "width": 42})
    processor.save_pretrained(OUT)
    processed = processor(images=Image.open(OUT / "image.png"), return_tensors="pt")["pixel_values"]
    save_file({"pixel_values": processed.contiguous()}, OUT / "processed.safetensors")
    print({k: tuple(v.shape) for k, v in expected.items()}, tuple(processed.shape), type(processor).__name__)


if __name__ == "__main__":
    main()
