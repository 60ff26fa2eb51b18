"""Reference for resizing the image an image-to-video run starts from: diffusers' VideoProcessor.preprocess
(VaeImageProcessor: PIL's Image.resize with Lanczos to the video's height x width, then x / 255 * 2 - 1),
on a 37 x 29 RGB PNG (odd sizes, so every pass filters), to sizes that shrink, stretch, and do one of each.
(PIL's bicubic resize, CLIPImageProcessor's, is checked by clip_vision_tiny.py's processed image.)

Writes tests/data/fixtures/image_resize/: source.png, pixels.safetensors with `lanczos_<H>x<W>` (1, 3, H, W)
f32 as the pipeline hands them to the VAE.

    /work/venv/bin/python tools/reference/image_resize.py   # diffusers 0.42.1, Pillow 13.0
"""
import pathlib

import numpy as np
from PIL import Image
from diffusers.video_processor import VideoProcessor
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/image_resize"
SIZES = [(48, 32), (16, 24), (24, 48)]  # (height, width): both stretched, both shrunk, one of each


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:29, 0:37]
    base = np.stack([x * 255 / 37, y * 255 / 29, 255 - (x + y) * 255 / 66], -1)
    pixels = np.clip(base + rng.normal(0, 50, base.shape), 0, 255).astype(np.uint8)  # sharp edges: overshoot
    Image.fromarray(pixels, "RGB").save(OUT / "source.png")
    image = Image.open(OUT / "source.png")
    processor = VideoProcessor(vae_scale_factor=8)
    tensors = {}
    for h, w in SIZES:
        tensors[f"lanczos_{h}x{w}"] = processor.preprocess(image, height=h, width=w).contiguous()
    save_file(tensors, OUT / "pixels.safetensors")
    for name, t in tensors.items():
        print(name, tuple(t.shape), t.dtype)


if __name__ == "__main__":
    main()
