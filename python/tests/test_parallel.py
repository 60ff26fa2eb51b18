"""enable_parallelism: every (ring, Ulysses) split on 1-4 local ranks gives the one-rank result (FLUX.1;
LTX-Video on ring 2 x Ulysses 2), and impossible configurations raise ValueError with the engine's
message."""

import numpy as np
import pytest

import cpdit
from conftest import FIXTURES, pack_tokens, read_safetensors

CASE = FIXTURES / "flux_pipeline_tiny"
# Splits change only the attention's summation order (and the LSE merge of the ring): observed 1e-5 on
# latents of magnitude 5 after 3 steps; every split against one rank within 1e-4, ten times that.
SPLIT_TOLERANCE = 1e-4
# The tiny transformer has 2 heads, so Ulysses degrees 1 and 2 (3 and 4 are refused, below); the ring
# takes any count.
SPLITS = [(1, 1), (2, 1), (1, 2), (3, 1), (4, 1), (2, 2)]
# Each split with p2p rotation, and those with a ring also with all-gather (no ring, nothing to rotate).
CASES = [(r, u, "p2p") for r, u in SPLITS] + [(r, u, "allgather") for r, u in SPLITS if r > 1]


def generate(pipe, **options):
    inputs = read_safetensors(CASE / "inputs.safetensors")
    return pipe(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                latents=inputs["latents"], height=32, width=32, num_inference_steps=3, output_type="latent",
                threads=1, **options).images


@pytest.fixture(scope="module")
def one_rank():
    return generate(cpdit.FluxPipeline.from_pretrained(CASE / "pipeline"))


@pytest.mark.parametrize("ring,ulysses,rotate", CASES)
def test_every_split_matches_one_rank(one_rank, ring, ulysses, rotate):
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    pipe.transformer.enable_parallelism(
        cpdit.ContextParallelConfig(ring_degree=ring, ulysses_degree=ulysses, rotate_method=rotate))
    latents = generate(pipe)
    assert latents.shape == one_rank.shape
    np.testing.assert_allclose(latents, one_rank, rtol=0, atol=SPLIT_TOLERANCE)


def test_both_backends_match(one_rank):
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    pipe.transformer.set_attention_backend("native")
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2))
    np.testing.assert_allclose(generate(pipe), one_rank, rtol=0, atol=SPLIT_TOLERANCE)


def test_ltx_split_matches_one_rank_and_diffusers():
    case = FIXTURES / "ltx_pipeline_tiny"
    inputs = read_safetensors(case / "inputs.safetensors")
    pipe = cpdit.LTXPipeline.from_pretrained(case / "pipeline")
    call = dict(prompt_embeds=inputs["prompt_embeds"], prompt_attention_mask=inputs["prompt_attention_mask"],
                negative_prompt_embeds=inputs["negative_prompt_embeds"],
                negative_prompt_attention_mask=inputs["negative_prompt_attention_mask"], latents=inputs["latents"],
                height=64, width=64, num_frames=9, num_inference_steps=3, output_type="latent", threads=1)
    one_rank = pipe(**call).frames
    # 2 heads on 2 Ulysses ranks, the 8 video and 24 text tokens around a ring of 2: 4 ranks.
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2, ulysses_degree=2))
    split = pipe(**call).frames
    np.testing.assert_allclose(split, one_rank, rtol=0, atol=SPLIT_TOLERANCE)
    expected = read_safetensors(case / "expected.safetensors")["latents"]
    np.testing.assert_allclose(split, pack_tokens(expected), rtol=0, atol=SPLIT_TOLERANCE)


def test_impossible_degrees_raise_the_engines_message():
    with pytest.raises(ValueError) as error:
        cpdit.ContextParallelConfig(ring_degree=0)
    assert str(error.value) == ("context parallel: ring degree 0 and Ulysses degree 1 must both be at least 1 "
                                "(1 turns a mode off)")
    with pytest.raises(ValueError, match=r"^unknown ring rotate method 'ring'; use p2p or allgather$"):
        cpdit.ContextParallelConfig(ring_degree=2, rotate_method="ring")
    with pytest.raises(ValueError, match=r"^CFG-parallel degree 3 is not 1 or 2"):
        cpdit.ContextParallelConfig(cfg_degree=3)


def test_more_ulysses_ranks_than_heads_raise_value_error():
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ulysses_degree=4))
    with pytest.raises(ValueError, match=r"Ulysses degree 4 exceeds the 2 query heads"):
        generate(pipe)


def test_ranks_that_contradict_the_config_raise_value_error():
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ring_degree=2))
    with pytest.raises(ValueError, match=r"^cfg 1 x ring 2 x ulysses 1 = 2 ranks, but 3 ranks run"):
        generate(pipe, ranks=3)


def test_unknown_backend_raises_value_error():
    pipe = cpdit.FluxPipeline.from_pretrained(CASE / "pipeline")
    with pytest.raises(ValueError, match=r"^unknown attention backend 'sdpa'; available: "):
        pipe.transformer.set_attention_backend("sdpa")
    with pytest.raises(ValueError, match="takes a cpdit.ContextParallelConfig"):
        pipe.transformer.enable_parallelism({"ring_degree": 2})
