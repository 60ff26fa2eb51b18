"""diffusers' step caches as its code enables them (``pipe.transformer.enable_cache(Config(...))``) on the
fixtures diffusers made with its own hooks (tests/data/fixtures/cache_flux_tiny, cache_wan_tiny): each
config gives diffusers' latents; one cache at a time, disable_cache() back to every block; what the
engine cannot take is a ValueError in one line."""

import pytest

import cpdit
from conftest import FIXTURES, read_safetensors

# diffusers' float32 run against the engine's with the same skips: summation order only, as the C++
# fixture tests (tests/pipeline/test_step_cache_fixtures.cpp) bound it; TaylorSeer's bf16 factors (its
# default) round a factor near a tie the other way under those differences, one bf16 step, which the
# later layers shrink (measured at most 3.3e-4 on a split, 1.5e-4 on one rank): there, 1e-3.
LATENTS_TOLERANCE = 1e-4
BF16_FACTORS_TOLERANCE = 1e-3


def flux():
    case = FIXTURES / "cache_flux_tiny"
    inputs = read_safetensors(case / "inputs.safetensors")
    call = dict(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                latents=inputs["latents"], height=16, width=24, num_inference_steps=8, output_type="latent")
    return cpdit.FluxPipeline.from_pretrained(case / "pipeline"), call, read_safetensors(case / "expected.safetensors")


def wan():
    case = FIXTURES / "cache_wan_tiny"
    inputs = read_safetensors(case / "inputs.safetensors")
    call = dict(prompt_embeds=inputs["prompt_embeds"], negative_prompt_embeds=inputs["negative_prompt_embeds"],
                latents=inputs["latents"], height=32, width=32, num_frames=5, num_inference_steps=6,
                output_type="latent")
    return cpdit.WanPipeline.from_pretrained(case / "pipeline"), call, read_safetensors(case / "expected.safetensors")


def max_diff(a, b):
    return float(abs(a - b).max())


def test_flux_configs_give_diffusers_latents():
    pipe, call, expected = flux()
    ratios = [1.0, 1.0223859548568726, 0.9761368632316589, 2.2227652072906494, 0.4196815490722656,
              2.312652826309204, 0.5865694880485535, 1.3829225301742554]  # the fixture's calibrated ratios
    for name, config, tolerance in [
        ("fbc_T1.0", cpdit.FirstBlockCacheConfig(threshold=1.0), LATENTS_TOLERANCE),
        ("taylorseer_default", cpdit.TaylorSeerCacheConfig(), BF16_FACTORS_TOLERANCE),
        ("taylorseer_interval2_before2_order2_fp32",
         cpdit.TaylorSeerCacheConfig(cache_interval=2, disable_cache_before_step=2, max_order=2,
                                     taylor_factors_dtype="float32"), LATENTS_TOLERANCE),
        ("magcache_calibrated_T0.5", cpdit.MagCacheConfig(threshold=0.5, mag_ratios=ratios, num_inference_steps=8),
         LATENTS_TOLERANCE),
    ]:
        pipe.transformer.enable_cache(config)
        assert pipe.transformer.is_cache_enabled
        assert max_diff(pipe(**call).images, expected[name]) < tolerance, name
        pipe.transformer.disable_cache()
    assert not pipe.transformer.is_cache_enabled
    assert max_diff(pipe(**call).images, expected["no_cache"]) < LATENTS_TOLERANCE


def test_wan_taylorseer_on_its_attentions_and_context_parallel():
    pipe, call, expected = wan()
    name = "taylorseer_interval2_before2_wan_attn_patterns"
    pipe.transformer.enable_cache(cpdit.TaylorSeerCacheConfig(
        cache_interval=2, disable_cache_before_step=2,
        cache_identifiers=[r"^blocks\.\d+\.attn1$", r"^blocks\.\d+\.attn2$"]))
    pipe.transformer.enable_parallelism(cpdit.ContextParallelConfig(ulysses_degree=2))
    assert max_diff(pipe(**call).frames, expected[name]) < BF16_FACTORS_TOLERANCE


def test_one_cache_at_a_time_and_bad_configs_are_value_errors():
    pipe, call, _ = flux()
    pipe.transformer.enable_cache(cpdit.FirstBlockCacheConfig())
    with pytest.raises(ValueError, match="already been enabled with FirstBlockCacheConfig"):
        pipe.transformer.enable_cache(cpdit.MagCacheConfig(calibrate=True))
    pipe.transformer.disable_cache()
    with pytest.raises(ValueError, match="nothing to disable"):
        pipe.transformer.disable_cache()
    with pytest.raises(ValueError, match="Cache config dict is not supported"):
        pipe.transformer.enable_cache({"threshold": 0.1})
    with pytest.raises(ValueError, match="the threshold must be a number >= 0, got '-1.0'"):
        cpdit.FirstBlockCacheConfig(threshold=-1)
    with pytest.raises(ValueError, match="cache_interval must be a whole number >= 1, got 0"):
        cpdit.TaylorSeerCacheConfig(cache_interval=0)
    with pytest.raises(ValueError, match="taylor_factors_dtype must be bfloat16 or float32, got 'float16'"):
        cpdit.TaylorSeerCacheConfig(taylor_factors_dtype="float16")
    with pytest.raises(ValueError, match="use_lite_mode are not supported"):
        cpdit.TaylorSeerCacheConfig(use_lite_mode=True)
    with pytest.raises(ValueError, match="retention_ratio is a share of the steps"):
        cpdit.MagCacheConfig(retention_ratio=2.0, mag_ratios=[1.0, 0.9])
    # A pattern that names no module of the model is refused when the call opens it.
    pipe.transformer.enable_cache(cpdit.TaylorSeerCacheConfig(cache_identifiers=["^nothing$"]))
    with pytest.raises(ValueError, match="TaylorSeer: no module of FluxTransformer2DModel matches"):
        pipe(**call)
