"""A pipeline call reads the caller's arrays where they lie: C-contiguous float32 embeddings, int64
prompt masks and latents reach the engine as the caller's own arrays, at their own addresses; other
layouts are copied once. Torch tensors cross through DLPack both ways, not copied (where torch is
installed; the package itself needs only numpy)."""

import numpy as np
import pytest

import cpdit
from cpdit import _cpdit
from conftest import FIXTURES, read_safetensors

CASE = FIXTURES / "ltx_pipeline_tiny"
CALL = dict(height=64, width=64, num_frames=9, num_inference_steps=2, output_type="latent", threads=1)


@pytest.fixture
def handed_over(monkeypatch):
    """The arrays each pipeline call hands the engine, by name, and the addresses the engine reads
    (the real pipeline still runs)."""
    seen = {}
    run = _cpdit.Pipeline.run

    def recording(pipeline, request, embeddings, latents, **options):
        arrays = dict(embeddings, latents=latents)
        seen.update({name: (array, _cpdit.borrowed_address(array)) for name, array in arrays.items()})
        return run(pipeline, request, embeddings, latents, **options)

    monkeypatch.setattr(_cpdit.Pipeline, "run", recording)
    return seen


def test_contiguous_inputs_reach_the_engine_uncopied(handed_over):
    inputs = read_safetensors(CASE / "inputs.safetensors")
    del inputs["decode_noise"]  # not a call argument
    assert inputs["prompt_attention_mask"].dtype == np.int64  # the masks as diffusers makes them
    cpdit.LTXPipeline.from_pretrained(CASE / "pipeline")(**inputs, **CALL)
    assert sorted(handed_over) == sorted(inputs)
    for name, array in inputs.items():
        given, address = handed_over[name]
        assert given is array, name
        assert address == array.ctypes.data, name


def test_other_layouts_are_copied_once_into_the_engines(handed_over):
    inputs = read_safetensors(CASE / "inputs.safetensors")
    strided = np.asfortranarray(inputs["prompt_embeds"])
    doubles = inputs["negative_prompt_embeds"].astype(np.float64)
    pipe = cpdit.LTXPipeline.from_pretrained(CASE / "pipeline")
    want = pipe(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                latents=inputs["latents"], **CALL).frames
    got = pipe(prompt_embeds=strided, negative_prompt_embeds=doubles, latents=inputs["latents"], **CALL).frames
    for name, original in (("prompt_embeds", strided), ("negative_prompt_embeds", doubles)):
        copy, address = handed_over[name]
        assert copy.flags.c_contiguous and copy.dtype == np.float32 and address != original.ctypes.data, name
    np.testing.assert_array_equal(got, want)  # the same numbers, so the same result


def test_torch_tensors_cross_through_dlpack_uncopied(handed_over):
    torch = pytest.importorskip("torch", reason="torch is optional; test_attention covers DLPack without it")
    inputs = {name: torch.from_numpy(array) for name, array in read_safetensors(CASE / "inputs.safetensors").items()}
    pipe = cpdit.LTXPipeline.from_pretrained(CASE / "pipeline")
    pipe(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
         latents=inputs["latents"], **CALL)
    for name in ("prompt_embeds", "negative_prompt_embeds", "latents"):
        assert handed_over[name][1] == inputs[name].data_ptr(), name
    q, k, v = (torch.randn(1, 16, 2, 8) for _ in range(3))
    out = cpdit.attention.dispatch(q, k, v)
    assert isinstance(out, torch.Tensor)  # torch in, torch out
    # Both sides are float32 softmax attention over 16 keys: rounding near 1e-6, and test_attention's
    # 2e-5 bound for the flash kernel's blocked exp.
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2), rtol=0, atol=2e-5)
