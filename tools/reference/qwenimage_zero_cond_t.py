"""Reference for QwenImageTransformer2DModel with zero_cond_t (Qwen-Image-Edit-2511): the timestep
embedding is computed for t and for t = 0, the first image segment of each item (the image being
made) is modulated by t, the later ones (the condition images) by t = 0, and the text stream and the
output head by t.

Writes tests/data/fixtures/qwenimage_zero_cond_t/: the qwenimage_tiny widths (in 16, out 4, 2 heads of 16,
2 blocks, joint 24, axes (4, 6, 6)) with zero_cond_t true, batch 2 (so the t and t = 0 halves of the
embedding cannot be confused with the items), two image segments per item ((1, 4, 6) then (1, 3, 4)),
7 text tokens of which the last 2 are padding in item 0.
  config.json, weights.safetensors (every parameter re-initialised, seed 31)
  inputs.safetensors   hidden_states (2, 36, 16), encoder_hidden_states (2, 7, 24),
                       encoder_hidden_states_mask (2, 7) I64, timestep (2,) = t/1000, img_shapes (2, 2, 3) I64
  expected.safetensors sample (2, 36, 16); sample_t_everywhere: the same weights with zero_cond_t false
                       (how far the t = 0 modulation moves the result)

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/qwenimage_zero_cond_t.py
"""
import json
import pathlib

import torch
from diffusers import QwenImageTransformer2DModel
from safetensors.torch import save_file

from flux_pipeline import reinitialise  # same folder: weights N(0, 1/fan_in), norm scales near 1

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/qwenimage_zero_cond_t"
CONFIG = dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
              joint_attention_dim=24, axes_dims_rope=(4, 6, 6))


def main():
    model = reinitialise(QwenImageTransformer2DModel(zero_cond_t=True, **CONFIG), 31)
    plain = QwenImageTransformer2DModel(zero_cond_t=False, **CONFIG).eval()
    plain.load_state_dict(model.state_dict())

    g = torch.Generator().manual_seed(32)
    segments = [(1, 4, 6), (1, 3, 4)]
    tokens = sum(f * h * w for f, h, w in segments)
    hidden = torch.randn(2, tokens, 16, generator=g)
    text = torch.randn(2, 7, 24, generator=g)
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[0, 5:] = 0
    timestep = torch.tensor([0.7, 0.35])
    img_shapes = torch.tensor([segments, segments], dtype=torch.int64)
    call = dict(hidden_states=hidden, encoder_hidden_states=text, encoder_hidden_states_mask=mask, timestep=timestep,
                img_shapes=[[tuple(s) for s in item] for item in img_shapes.tolist()], return_dict=False)
    with torch.no_grad():
        sample = model(**call)[0]
        sample_plain = plain(**call)[0]

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "config.json").write_text(json.dumps(dict(model.config), indent=2, default=list) + "\n")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, OUT / "weights.safetensors")
    save_file({"hidden_states": hidden, "encoder_hidden_states": text, "encoder_hidden_states_mask": mask,
               "timestep": timestep, "img_shapes": img_shapes}, OUT / "inputs.safetensors")
    save_file({"sample": sample.contiguous(), "sample_t_everywhere": sample_plain.contiguous()},
              OUT / "expected.safetensors")
    print("sample", tuple(sample.shape), float(sample.abs().max()), "zero_cond_t moves it by",
          float((sample - sample_plain).abs().max()))


if __name__ == "__main__":
    main()
