"""pipe.scheduler as diffusers has it: the pipeline's own scheduler with its config, replaced by another class's
from_config, and the call runs the one set (tests/data/fixtures/schedulers, tools/reference/schedulers.py)."""

import numpy as np
import pytest

import cpdit
from conftest import FIXTURES, read_safetensors

# diffusers' FluxPipeline with DPM++ 2M against the engine's: summation order of the transformer over 3
# steps (as the default scheduler's parity, test_diffusers_parity.py) and libm's exp/log; observed 3e-6.
LATENTS_TOLERANCE = 1e-5


def packed(latents):
    """(B, C, H, W) as FluxPipeline packs them: (B, H/2 * W/2, C * 4)."""
    b, c, h, w = latents.shape
    return latents.reshape(b, c, h // 2, 2, w // 2, 2).transpose(0, 2, 4, 1, 3, 5).reshape(b, h * w // 4, c * 4)


def test_the_pipeline_scheduler_is_its_folders_and_from_config_carries_it():
    pipe = cpdit.FluxPipeline.from_pretrained(FIXTURES / "flux_pipeline_tiny" / "pipeline")
    assert isinstance(pipe.scheduler, cpdit.FlowMatchEulerDiscreteScheduler)
    assert pipe.scheduler.config.use_dynamic_shifting and pipe.scheduler.config["shift"] == 3.0
    dpm = cpdit.DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
    assert dpm.config.use_dynamic_shifting and dpm.config.use_flow_sigmas
    assert dpm.config.prediction_type == "flow_prediction"
    assert isinstance(cpdit.WanPipeline.from_preset("wan-tiny").scheduler, cpdit.UniPCMultistepScheduler)


def test_a_flux_pipeline_with_dpm_solver_matches_diffusers():
    case = FIXTURES / "flux_pipeline_tiny"
    inputs = read_safetensors(case / "inputs.safetensors")
    expected = read_safetensors(FIXTURES / "schedulers" / "flux_dpm.safetensors")
    pipe = cpdit.FluxPipeline.from_pretrained(case / "pipeline")
    call = dict(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                latents=inputs["latents"], height=32, width=32, num_inference_steps=3, guidance_scale=3.5,
                output_type="latent", ranks=1)
    euler = pipe(**call).images
    pipe.scheduler = cpdit.DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
    latents = pipe(**call).images
    np.testing.assert_allclose(latents, packed(expected["latents"]), rtol=0, atol=LATENTS_TOLERANCE)
    assert np.abs(latents - euler).max() > 0.1  # the scheduler set is the one that ran


def test_a_scheduler_the_engine_does_not_run_is_refused_when_set():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    with pytest.raises(ValueError, match="algorithm_type='sde-dpmsolver\\+\\+' is not supported"):
        pipe.scheduler = cpdit.DPMSolverMultistepScheduler(algorithm_type="sde-dpmsolver++")
    with pytest.raises(ValueError, match="must be a cpdit scheduler"):
        pipe.scheduler = object()
    # One the family does not take is the engine's one-line refusal at the call.
    pipe.scheduler = cpdit.UniPCMultistepScheduler()
    with pytest.raises(ValueError, match="--scheduler unipc is not for flux"):
        pipe(num_inference_steps=1, height=32, width=32, max_sequence_length=8, output_type="latent")


def test_a_static_shift_set_on_the_scheduler_is_the_calls_flow_shift():
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    call = dict(num_inference_steps=2, height=32, width=32, max_sequence_length=8, output_type="latent", ranks=1)
    pipe.scheduler = cpdit.DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)
    default_shift = pipe(**call).images
    pipe.scheduler = cpdit.DPMSolverMultistepScheduler.from_config(pipe.scheduler.config, use_dynamic_shifting=False,
                                                                   flow_shift=7.0)
    assert np.abs(pipe(**call).images - default_shift).max() > 1e-3


def test_sigmas_are_the_schedule_and_their_count_the_steps():
    # flux-tiny runs FLUX.1-schnell's schedule (shift 1, no dynamic shift): 4 steps are sigmas
    # linspace(1, 1/4, 4), so giving them is the same run, bit for bit; other sigmas are another run.
    pipe = cpdit.FluxPipeline.from_preset("flux-tiny")
    call = dict(prompt="a fox", height=32, width=32, threads=1, output_type="latent")
    steps = pipe(num_inference_steps=4, **call).images
    np.testing.assert_array_equal(pipe(sigmas=[1.0, 0.75, 0.5, 0.25], **call).images, steps)
    np.testing.assert_array_equal(pipe(sigmas=np.array([1.0, 0.75, 0.5, 0.25]), **call).images, steps)
    assert np.abs(pipe(sigmas=[1.0, 0.6, 0.3, 0.1], **call).images - steps).max() > 1e-3
    with pytest.raises(ValueError, match="sigmas must be a non-empty list of numbers"):
        pipe(sigmas=[], **call)
    with pytest.raises(ValueError, match="sigmas must be a finite number"):
        pipe(sigmas=[1.0, float("nan")], **call)
