"""Reference for reading a picture's settings back (`cpdit inspect out.jpg`): JPEG and WebP files that
carry generation settings the way AUTOMATIC1111's web UI writes them (piexif.dump of an Exif IFD whose
UserComment is piexif.helper.UserComment.dump(text, encoding="unicode"): big-endian TIFF, "UNICODE\\0",
UTF-16BE), and one Pillow writes itself with a little-endian TIFF and an ASCII UserComment, so both byte
orders and both character codes are read.

Writes tests/data/fixtures/picture_settings/: a1111.jpg, a1111.webp, pillow_ascii.jpg, and expected.json
({file: the text piexif.helper.UserComment.load reads back from it}).

    /work/refvenv/bin/pip install pillow piexif
    python tools/reference/picture_settings.py   # Pillow 13.0.0, piexif 1.1.3
"""
import json
import pathlib

import piexif
import piexif.helper
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/picture_settings"

# Non-ASCII text, a character outside the BMP (a surrogate pair in UTF-16) and a newline, as A1111's
# "parameters" have (the prompt, then "Negative prompt: ...", then the settings line).
TEXT = "a fox in the snow, 狐, 🦊\nNegative prompt: blurry\nSteps: 4, Sampler: Euler, CFG scale: 3.5, Seed: 42"
ASCII_TEXT = "Steps: 8, Seed: 7, Model: cpdit-test"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (9, 7), (200, 30, 90))
    a1111 = piexif.dump({"Exif": {piexif.ExifIFD.UserComment: piexif.helper.UserComment.dump(TEXT, encoding="unicode")}})
    image.save(OUT / "a1111.jpg", quality=90, exif=a1111)
    image.save(OUT / "a1111.webp", quality=90, exif=a1111)
    exif = Image.Exif()  # Pillow's own writer, told to write a little-endian TIFF ("II*\\0")
    exif.endian = "<"
    exif.get_ifd(0x8769)[0x9286] = b"ASCII\0\0\0" + ASCII_TEXT.encode("ascii")
    image.save(OUT / "pillow_ascii.jpg", quality=90, exif=exif.tobytes())
    expected = {}
    for name in ("a1111.jpg", "a1111.webp", "pillow_ascii.jpg"):
        raw = Image.open(OUT / name).getexif().get_ifd(0x8769)[0x9286]
        expected[name] = piexif.helper.UserComment.load(raw)
    (OUT / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n")
    print(json.dumps(expected, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
