"""``pipe.vae`` as diffusers scripts use it: its config by diffusers' names, and ``vae.decode`` on the
latents diffusers' own pipelines hand their VAE (the fixtures' final latents, unscaled as FluxPipeline
and WanPipeline do it) giving diffusers' own pictures; the decode split over ranks gives the one-rank
sample; a pipeline without a VAE says so."""

import json
import warnings

import numpy as np
import pytest

import cpdit
from conftest import FIXTURES, read_safetensors

# diffusers' float32 VAE and the engine's differ in summation order only; the fixtures' pictures went
# through the same decoder from the same latents (observed gap 2e-6). 1e-5 is five times that; a wrong
# unscaling or layout is off by tenths.
SAMPLE_TOLERANCE = 1e-5


def to_pixels(sample, channels_last):
    """diffusers' postprocess to output_type="np": x / 2 + 0.5 clamped to [0, 1], channels last."""
    return np.clip(sample / 2 + 0.5, 0, 1).transpose(channels_last)


def test_flux_vae_decodes_diffusers_latents_to_diffusers_image():
    case = FIXTURES / "flux_pipeline_tiny"
    pipe = cpdit.FluxPipeline.from_pretrained(case / "pipeline")
    on_disk = json.loads((case / "pipeline" / "vae" / "config.json").read_text())
    config = pipe.vae.config
    assert config["_class_name"] == "AutoencoderKL"
    for key in ("scaling_factor", "shift_factor", "latent_channels", "block_out_channels", "layers_per_block"):
        assert config[key] == on_disk[key], key
        assert getattr(config, key) == on_disk[key], key
    expected = read_safetensors(case / "expected.safetensors")
    z = expected["latents"] / config.scaling_factor + config.shift_factor  # FluxPipeline's, before vae.decode
    sample = pipe.vae.decode(z, return_dict=False)[0]
    assert sample.shape == (1, 3, 32, 32)
    np.testing.assert_allclose(to_pixels(sample, (0, 2, 3, 1)), expected["image"], rtol=0, atol=SAMPLE_TOLERANCE)
    assert pipe.vae.decode(z).sample.shape == sample.shape  # DecoderOutput by default


def test_wan_vae_decodes_diffusers_latents_and_splits_over_ranks():
    case = FIXTURES / "wan_pipeline_tiny"
    pipe = cpdit.WanPipeline.from_pretrained(case / "pipeline")
    config = pipe.vae.config
    assert config["_class_name"] == "AutoencoderKLWan"
    expected = read_safetensors(case / "expected.safetensors")
    # WanPipeline: latents / (1 / latents_std) + latents_mean, per channel.
    mean = np.array(config.latents_mean, np.float32).reshape(1, -1, 1, 1, 1)
    inverse_std = 1.0 / np.array(config.latents_std, np.float32).reshape(1, -1, 1, 1, 1)
    z = (expected["latents"] / inverse_std + mean).astype(np.float32)
    sample = pipe.vae.decode(z).sample
    np.testing.assert_allclose(to_pixels(sample, (0, 2, 3, 4, 1)), expected["video"], rtol=0, atol=SAMPLE_TOLERANCE)
    # The pipeline's parallel config splits the rows over two ranks: the one-rank sample within float32
    # rounding (the GroupNorm sums and the mid-block softmax merge in another order; observed 2e-6 on
    # values of magnitude 1; tests/models/test_vae_parallel.cpp holds the split to the same 1e-5).
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ulysses_degree=2))
    split = pipe.vae.decode(z).sample
    np.testing.assert_allclose(split, sample, rtol=0, atol=SAMPLE_TOLERANCE)
    assert not np.array_equal(split, sample)  # rounded otherwise: the decode did split (deterministically)


def test_tiling_calls_change_nothing_and_say_so():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    for call in (pipe.vae.enable_tiling, pipe.vae.disable_tiling, pipe.vae.enable_slicing, pipe.vae.disable_slicing):
        with pytest.warns(UserWarning, match="cpdit decodes whole, exactly"):
            call()


def test_a_pipeline_without_a_vae_says_so():
    pipe = cpdit.FluxPipeline.from_single_file(FIXTURES / "flux_tiny" / "weights.safetensors")
    with pytest.raises(ValueError, match="has no vae/"):
        pipe.vae.config
    with pytest.raises(ValueError, match="has no vae/"):
        pipe.vae.decode(np.zeros((1, 16, 4, 4), np.float32))
