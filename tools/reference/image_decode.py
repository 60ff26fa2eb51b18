"""Reference for reading input pictures (--init-image, --first-image, --last-image, a Python image= path):
what Pillow's Image.open(path).convert("RGB") gives for small JPEG and WebP files of each kind cpdit
reads, so that io::read_image can be held to within one 8-bit level of it (libjpeg's and libwebp's
versions may differ between Pillow's wheels and Debian's packages).

Writes tests/data/fixtures/image_decode/: for each case NAME.jpg or NAME.webp (33 x 17 pixels: odd sizes,
so chroma subsampling has edge columns and rows) and NAME.expected.png, Pillow's RGB decode of it stored
losslessly; and cmyk.jpg, an Adobe CMYK JPEG (cpdit refuses those).

    python3 -m venv /tmp/pil && /tmp/pil/bin/pip install pillow numpy
    /tmp/pil/bin/python tools/reference/image_decode.py   # Pillow 13.0.0 (libjpeg-turbo 3, libwebp 1.6)
"""
import pathlib

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/image_decode"
WIDTH, HEIGHT = 33, 17


def source():
    """Gradients with noise: smooth areas and sharp edges, so upsampling and the IDCT both matter."""
    rng = np.random.default_rng(34)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    base = np.stack([x * 255 / WIDTH, y * 255 / HEIGHT, 255 - (x + y) * 255 / (WIDTH + HEIGHT)], -1)
    return np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rgb = Image.fromarray(source(), "RGB")
    alpha = Image.fromarray((np.arange(WIDTH * HEIGHT).reshape(HEIGHT, WIDTH) * 7 % 256).astype(np.uint8), "L")
    rgba = rgb.copy()
    rgba.putalpha(alpha)  # every alpha level, 0 included: convert("RGB") keeps the colour under it
    cases = {
        "baseline_420.jpg": lambda p: rgb.save(p, quality=85, subsampling=2),
        "baseline_422.jpg": lambda p: rgb.save(p, quality=85, subsampling=1),
        "baseline_444.jpg": lambda p: rgb.save(p, quality=95, subsampling=0),
        "progressive_420.jpg": lambda p: rgb.save(p, quality=85, subsampling=2, progressive=True),
        "gray.jpg": lambda p: rgb.convert("L").save(p, quality=85),
        "lossy.webp": lambda p: rgb.save(p, quality=80),
        "lossless.webp": lambda p: rgb.save(p, lossless=True),
        "lossy_alpha.webp": lambda p: rgba.save(p, quality=80, exact=True),
        "lossless_alpha.webp": lambda p: rgba.save(p, lossless=True, exact=True),
    }
    for name, save in cases.items():
        path = OUT / name
        save(path)
        decoded = Image.open(path)
        print(f"{name}: {decoded.format} {decoded.mode} {decoded.size}, {path.stat().st_size} bytes")
        decoded.convert("RGB").save(OUT / (path.stem + ".expected.png"))
    rgb.convert("CMYK").save(OUT / "cmyk.jpg", quality=85)


if __name__ == "__main__":
    main()
