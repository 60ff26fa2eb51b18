"""Shared helpers of the Python package's tests: the fixtures folder, the built binary, safetensors."""

import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "fixtures"


def read_safetensors(path):
    """Every tensor of a safetensors file as a numpy array (F32, BOOL and I64 are all these tests need)."""
    dtypes = {"F32": np.float32, "BOOL": np.bool_, "I64": np.int64}
    data = pathlib.Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"]).copy()
    return tensors


def mpirun_python(script, processes=2, timeout=120):
    """`mpirun -np N python -c script` as root may run it (Open MPI's two variables), its output captured."""
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun is missing (scripts/setup.sh installs openmpi-bin)"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([mpirun, "-np", str(processes), "--oversubscribe", sys.executable, "-c", script], env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def cpdit_binary():
    """The cpdit binary of the same build (build/bin/cpdit, or $CPDIT_BINARY)."""
    path = pathlib.Path(os.environ.get("CPDIT_BINARY", ROOT / "build" / "bin" / "cpdit"))
    assert path.is_file(), f"{path} is missing: build the project first (scripts/build.sh)"
    return path


def pack_latents(latents):
    """(B, C, H, W) FLUX.1 latents as diffusers packs them: (B, H/2 * W/2, C * 4)."""
    b, c, h, w = latents.shape
    return latents.reshape(b, c, h // 2, 2, w // 2, 2).transpose(0, 2, 4, 1, 3, 5).reshape(b, h * w // 4, c * 4)


def pack_tokens(latents):
    """(B, C, F, H, W) LTX-Video latents as LTXPipeline packs them: (B, F * H * W, C)."""
    return latents.reshape(latents.shape[0], latents.shape[1], -1).transpose(0, 2, 1)
