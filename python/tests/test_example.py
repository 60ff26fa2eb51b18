"""examples/python_pipeline.py runs as its docstring says: a preset pipeline on two local ranks, the
image saved as a PNG of the asked size."""

import subprocess
import sys

from PIL import Image

from conftest import ROOT


def test_example_writes_the_image(tmp_path):
    out = tmp_path / "fox.png"
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python_pipeline.py"), "--preset", "flux-tiny", "--size", "32",
         "--steps", "1", "--ring", "2", "--ulysses", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"wrote {out} in ")
    with Image.open(out) as image:
        assert (image.size, image.mode) == ((32, 32), "RGB")
