"""What every diffusers script does works on a cpdit pipeline: ``.to("cpu")`` and ``.to(torch.bfloat16)``
(a device other than the CPU refused in one line), ``torch_dtype=`` in from_pretrained, ``generator=``
(an int, a torch.Generator by its initial_seed(), a numpy.random.Generator) and ``return_dict=False``.
torch is not a dependency: its dtypes and generators are stood in for by objects that print and answer
as torch's do (str(torch.bfloat16) == "torch.bfloat16", Generator.initial_seed())."""

import numpy as np
import pytest

import cpdit
from conftest import FIXTURES

FLUX = FIXTURES / "flux_pipeline_tiny" / "pipeline"
CALL = dict(height=32, width=32, num_inference_steps=2, max_sequence_length=8, threads=1, output_type="latent",
            random_embeddings=True)  # the fixture folder has no text encoders


class TorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class TorchGenerator:
    def __init__(self, seed):
        self.seed = seed

    def initial_seed(self):
        return self.seed


def test_to_cpu_is_the_pipeline_and_another_device_is_refused():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    assert pipe.to("cpu") is pipe
    assert pipe.to(device="cpu:0") is pipe
    for device in ("cuda", "cuda:1", "mps"):
        with pytest.raises(ValueError, match=f"cpdit runs on CPUs: there is no '{device}' device"):
            pipe.to(device)


def test_to_a_torch_dtype_or_torch_dtype_sets_the_weights_dtype():
    bf16 = cpdit.FluxPipeline.from_pretrained(FLUX)(dtype="bf16", **CALL).images
    f32 = cpdit.FluxPipeline.from_pretrained(FLUX)(**CALL).images
    assert np.abs(bf16 - f32).max() > 0  # the dtype shows in the result
    moved = cpdit.FluxPipeline.from_pretrained(FLUX).to("cpu", TorchDtype("torch.bfloat16"))
    np.testing.assert_array_equal(moved(**CALL).images, bf16)
    loaded = cpdit.FluxPipeline.from_pretrained(FLUX, torch_dtype=TorchDtype("torch.bfloat16"))
    np.testing.assert_array_equal(loaded(**CALL).images, bf16)
    np.testing.assert_array_equal(loaded.to(TorchDtype("torch.float32"))(**CALL).images, f32)
    with pytest.raises(ValueError, match="torch_dtype must be torch.float32, torch.bfloat16 or one of"):
        cpdit.FluxPipeline.from_pretrained(FLUX, torch_dtype=TorchDtype("torch.float16"))


def test_generator_seeds_the_noise_as_generator_seed_does():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    want = pipe(generator_seed=5, **CALL).images
    np.testing.assert_array_equal(pipe(generator=5, **CALL).images, want)
    np.testing.assert_array_equal(pipe(generator=TorchGenerator(5), **CALL).images, want)
    draw = int(np.random.default_rng(1).integers(0, 2**63))
    np.testing.assert_array_equal(pipe(generator=np.random.default_rng(1), **CALL).images,
                                  pipe(generator_seed=draw, **CALL).images)
    assert np.abs(pipe(generator=6, **CALL).images - want).max() > 1e-3
    with pytest.raises(ValueError, match="give generator or generator_seed, not both"):
        pipe(generator=5, generator_seed=5, **CALL)
    with pytest.raises(ValueError, match="generator must be a whole number >= 0"):
        pipe(generator=-1, **CALL)


def test_return_dict_false_is_a_tuple_of_the_output():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    images = pipe(**CALL).images
    output = pipe(return_dict=False, **CALL)
    assert isinstance(output, tuple) and len(output) == 1
    np.testing.assert_array_equal(output[0], images)


def test_a_model_without_text_is_refused_unless_asked_for_random_embeddings():
    call = dict(CALL, random_embeddings=None)
    with pytest.raises(ValueError, match="no prompt"):
        cpdit.FluxPipeline.from_pretrained(FLUX)(**call)
    assert cpdit.FluxPipeline.from_pretrained(FLUX)(**CALL).images.shape[0] == 1
    with pytest.raises(ValueError, match="random_embeddings must be True or False"):
        cpdit.FluxPipeline.from_pretrained(FLUX)(**dict(CALL, random_embeddings=1))
