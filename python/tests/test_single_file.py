"""diffusers' from_single_file: one transformer weights file, opened as `cpdit generate --model FILE` opens
it — alone (no text encoders or VAE: latents out), or inside a diffusers pipeline folder given as config=,
whose text encoders, scheduler and VAE then run around it and whose transformer/config.json reads it."""

import shutil

import numpy as np
import pytest

import cpdit
from conftest import FIXTURES

FLUX = FIXTURES / "flux_pipeline_tiny" / "pipeline"
CALL = dict(height=32, width=32, num_inference_steps=2, threads=1, random_embeddings=True)  # no text encoders here


@pytest.fixture
def transformer_file(tmp_path):
    """The pipeline folder's transformer weights as one file, with no config.json beside it."""
    path = tmp_path / "flux.safetensors"
    shutil.copy(FLUX / "transformer" / "diffusion_pytorch_model.safetensors", path)
    return path


def test_a_file_inside_a_pipeline_folder_is_that_pipeline(transformer_file):
    single = cpdit.FluxPipeline.from_single_file(transformer_file, config=FLUX)
    folder = cpdit.FluxPipeline.from_pretrained(FLUX)
    # The same weights, scheduler and VAE: the same pixels, bit for bit.
    np.testing.assert_array_equal(single(**CALL, output_type="np").images, folder(**CALL, output_type="np").images)


def test_a_gguf_file_alone_gives_latents_and_refuses_to_decode():
    pipe = cpdit.FluxPipeline.from_single_file(FIXTURES / "gguf" / "flux_tiny_q8_0.gguf",
                                               config=FIXTURES / "flux_tiny" / "config.json")
    # 32x32 pixels at the VAE's 8: 4x4 latents of 1 channel, packed into 4 tokens of 4.
    assert pipe(**CALL, output_type="latent").images.shape == (1, 4, 4)
    with pytest.raises(ValueError, match=r"^from_single_file without a pipeline folder has no VAE to decode with: "
                                         r"call with output_type='latent', or give config= a diffusers pipeline"):
        pipe(**CALL)


def test_what_from_single_file_cannot_open_is_refused_naming_the_keyword(transformer_file):
    with pytest.raises(ValueError, match=r"from_single_file: path .*pipeline is not a file \(a folder loads with "
                                         r"from_pretrained\)"):
        cpdit.FluxPipeline.from_single_file(FLUX)
    with pytest.raises(ValueError, match=r"from_single_file: config=.*no_such_folder does not exist"):
        cpdit.FluxPipeline.from_single_file(transformer_file, config=FIXTURES / "no_such_folder")
    with pytest.raises(ValueError, match="holds a WanPipeline, not a FluxPipeline"):
        cpdit.FluxPipeline.from_single_file(transformer_file, config=FIXTURES / "wan_pipeline_tiny" / "pipeline")
    # The file alone: the sizes its tensors tell with FLUX.1-dev's RoPE axes, which this tiny model's heads
    # do not fit; the engine's message names the keyword that gives the right ones.
    with pytest.raises(ValueError, match=r"axes_dims_rope must be 3 widths summing to attention_head_dim \(16\).*"
                                         r"\(pass config= with the right axes_dims_rope\)$"):
        cpdit.FluxPipeline.from_single_file(transformer_file)(**CALL, output_type="latent")
