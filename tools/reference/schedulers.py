"""Reference for the schedulers `--scheduler` picks (cpdit's make_scheduler.hpp), from diffusers' own classes:

  dpm++2m  DPMSolverMultistepScheduler(use_flow_sigmas=True, prediction_type="flow_prediction",
           algorithm_type="dpmsolver++", solver_type="midpoint", solver_order=2, final_sigmas_type="zero",
           lower_order_final=True) with a static flow_shift, or with use_dynamic_shifting (flow_shift = exp(mu)),
           as DPMSolverMultistepScheduler.from_config(<FLUX.1-dev's FlowMatchEuler config>, use_flow_sigmas=True, ...)
  euler_a  FlowMatchEulerDiscreteScheduler(stochastic_sampling=True), sigmas passed as FluxPipeline passes them
  euler    FlowMatchEulerDiscreteScheduler with a static shift (--flow-shift) and with custom sigmas (--sigmas)
  unipc    UniPCMultistepScheduler (Wan's config) with custom sigmas (--sigmas) and another flow_shift

Writes tests/data/fixtures/schedulers/:
  schedulers.json          one entry a case: the class, its config, the set_timesteps arguments (steps, mu,
                           sigmas), the resulting timesteps and sigmas (float32 values as doubles), and for
                           cases with a trajectory its tensor names
  trajectories.safetensors per trajectory case CASE: CASE/sample (the start, (2, 4, 8) float32), CASE/model_output_K
                           (given: fixed random tensors, not a model), CASE/noise_K (euler_a: the noise step K
                           drew, recorded from a copy of its generator), CASE/sample_K (after step K)
  flux_dpm.safetensors     latents (1, 4, 16, 16): FluxPipeline on tests/data/fixtures/flux_pipeline_tiny (its
                           inputs.safetensors, 3 steps, guidance 3.5) with its scheduler replaced by
                           DPMSolverMultistepScheduler.from_config(pipe.scheduler.config, use_flow_sigmas=True,
                           prediction_type="flow_prediction"), the final latents unpacked; its timesteps (int64)
                           and sigmas (float32)

    OMP_NUM_THREADS=1 /work/refvenv/bin/python tools/reference/schedulers.py   # torch 2.x, diffusers 0.42.1 (PyPI)
"""
import json
import pathlib

import numpy as np
import torch
import diffusers
from diffusers import DPMSolverMultistepScheduler, FlowMatchEulerDiscreteScheduler, FluxPipeline, UniPCMultistepScheduler
from safetensors.torch import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/schedulers"
FLUX_CASE = ROOT / "tests/data/fixtures/flux_pipeline_tiny"
SHAPE = (2, 4, 8)

FLUX_DEV = dict(shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15, base_image_seq_len=256,
                max_image_seq_len=4096)
DPM_FLOW = dict(use_flow_sigmas=True, prediction_type="flow_prediction", algorithm_type="dpmsolver++",
                solver_type="midpoint", solver_order=2, final_sigmas_type="zero", lower_order_final=True)


def calculate_shift(seq_len, base_seq_len=256, max_seq_len=4096, base_shift=0.5, max_shift=1.15):
    """FluxPipeline's calculate_shift, in Python floats."""
    m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    b = base_shift - m * base_seq_len
    return seq_len * m + b


def plain(value):
    """A config value as strict JSON: -inf (lambda_min_clipped) as the string "-inf"."""
    return str(value) if isinstance(value, float) and not np.isfinite(value) else value


def floats(t):
    return [float(v) for v in torch.as_tensor(t).double().flatten()]


def schedule(scheduler, steps, mu=None, sigmas=None, flux_sigmas=False):
    """set_timesteps as the pipelines call it: FluxPipeline passes sigmas=linspace(1, 1/n, n) to
    FlowMatchEuler (flux_sigmas), custom sigmas replace those."""
    kwargs = {}
    if mu is not None:
        kwargs["mu"] = mu
    if sigmas is not None:
        kwargs["sigmas"] = np.array(sigmas)  # float64, as a Python list becomes (UniPC takes only arrays)
    elif flux_sigmas:
        kwargs["sigmas"] = np.linspace(1.0, 1 / steps, steps)
    scheduler.set_timesteps(None if sigmas is not None else steps, **kwargs)
    scheduler.set_begin_index(0)


def trajectory(name, scheduler, tensors, seed):
    g = torch.Generator().manual_seed(seed)
    sample = torch.randn(SHAPE, generator=g)
    tensors[f"{name}/sample"] = sample.clone()
    noise_generator = torch.Generator().manual_seed(seed + 1)
    for k, t in enumerate(scheduler.timesteps):
        model_output = torch.randn(SHAPE, generator=g)
        tensors[f"{name}/model_output_{k}"] = model_output.clone()
        kwargs = {}
        if getattr(scheduler.config, "stochastic_sampling", False):
            copy = torch.Generator().manual_seed(0)
            copy.set_state(noise_generator.get_state())
            tensors[f"{name}/noise_{k}"] = torch.randn(SHAPE, generator=copy, dtype=torch.float32)
            kwargs["generator"] = noise_generator
        sample = scheduler.step(model_output, t, sample, **kwargs).prev_sample
        tensors[f"{name}/sample_{k}"] = sample.clone()
    return len(scheduler.timesteps)


def main():
    cases, tensors = [], {}

    def add(name, scheduler, steps, cpdit, seq_len=None, sigmas=None, flux_sigmas=False, seed=None):
        """`cpdit`: how cpdit asks for the same scheduler, make_scheduler(choice, family) with family
        "flux_dev" (FlowMatchEulerConfig::flux_dev()) or "wan21" (UniPCConfig::wan21(3.0))."""
        mu = calculate_shift(seq_len) if seq_len is not None else None
        schedule(scheduler, steps, mu, sigmas, flux_sigmas)
        choice = dict(zip(("family", "scheduler", "flow_shift"), cpdit))
        choice.update(sigmas=sigmas, image_seq_len=seq_len or 0)
        case = {"name": name, "class": type(scheduler).__name__, "cpdit": choice,
                "config": {k: plain(v) for k, v in dict(scheduler.config).items() if not k.startswith("_")},
                "steps": len(scheduler.timesteps), "mu": mu, "custom_sigmas": sigmas,
                "timesteps": floats(scheduler.timesteps), "sigmas": floats(scheduler.sigmas)}
        if seed is not None:
            case["trajectory_steps"] = trajectory(name, scheduler, tensors, seed)
        cases.append(case)

    dpm_static = lambda shift: DPMSolverMultistepScheduler(flow_shift=shift, **DPM_FLOW)
    dpm_flux = lambda: DPMSolverMultistepScheduler.from_config(FlowMatchEulerDiscreteScheduler(**FLUX_DEV).config,
                                                               **DPM_FLOW)
    for steps in (1, 2, 3, 10, 28, 50):
        add(f"dpm++2m/shift3/steps{steps}", dpm_static(3.0), steps, ("wan21", "dpm++2m", None))
        add(f"dpm++2m/flux_dynamic/seq4096/steps{steps}", dpm_flux(), steps, ("flux_dev", "dpm++2m", None), 4096)
    add("dpm++2m/shift5/steps8", dpm_static(5.0), 8, ("wan21", "dpm++2m", 5.0), seed=11)                    # Wan 720p's flow_shift
    add("dpm++2m/flux_dynamic/seq64/steps6", dpm_flux(), 6, ("flux_dev", "dpm++2m", None), 64, seed=12)
    add("dpm++2m/shift1/steps20", dpm_static(1.0), 20, ("flux_dev", "dpm++2m", 1.0), seed=13)                  # --flow-shift 1: 20 steps

    euler_a_static = lambda shift: FlowMatchEulerDiscreteScheduler(shift=shift, stochastic_sampling=True)
    euler_a_flux = lambda: FlowMatchEulerDiscreteScheduler(stochastic_sampling=True, **FLUX_DEV)
    add("euler_a/shift3/steps6", euler_a_static(3.0), 6, ("flux_dev", "euler_a", 3.0), flux_sigmas=True, seed=21)
    add("euler_a/flux_dynamic/seq64/steps5", euler_a_flux(), 5, ("flux_dev", "euler_a", None), 64, flux_sigmas=True,
        seed=22)

    # --flow-shift on flow-match Euler: a static shift, dynamic shifting off.
    for steps in (1, 4, 28):
        add(f"euler/shift2.5/steps{steps}", FlowMatchEulerDiscreteScheduler(shift=2.5), steps,
            ("flux_dev", "euler", 2.5), flux_sigmas=True)
    # --sigmas: diffusers still shifts them (statically, or by mu).
    custom = [1.0, 0.8, 0.55, 0.3, 0.1]
    add("euler/flux_dynamic/seq64/sigmas5", FlowMatchEulerDiscreteScheduler(**FLUX_DEV), 5, ("flux_dev", "euler", None),
        64, sigmas=custom)
    add("euler/shift1/sigmas5", FlowMatchEulerDiscreteScheduler(shift=1.0), 5, ("flux_dev", "euler", 1.0), sigmas=custom)
    add("euler_a/shift3/sigmas5", euler_a_static(3.0), 5, ("flux_dev", "euler_a", 3.0), sigmas=custom, seed=23)
    unipc = lambda shift: UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                                  flow_shift=shift)
    add("unipc/shift3/sigmas5", unipc(3.0), 5, ("wan21", "unipc", None), sigmas=custom, seed=31)
    add("unipc/shift7/steps6", unipc(7.0), 6, ("wan21", "unipc", 7.0), seed=32)                          # --flow-shift 7 on Wan

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "schedulers.json").write_text(json.dumps(
        {"diffusers_version": diffusers.__version__, "torch_version": torch.__version__,
         "numpy_version": np.__version__, "trajectory_shape": list(SHAPE), "cases": cases}, indent=1, allow_nan=False) + "\n")
    save_file({k: v.contiguous() for k, v in tensors.items()}, OUT / "trajectories.safetensors")

    # The whole FLUX.1 pipeline with DPM++ 2M.
    pipe = FluxPipeline.from_pretrained(FLUX_CASE / "pipeline", text_encoder=None, tokenizer=None,
                                        text_encoder_2=None, tokenizer_2=None)
    pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config, **DPM_FLOW)
    inputs = load_file(FLUX_CASE / "inputs.safetensors")
    case = json.loads((FLUX_CASE / "case.json").read_text())
    with torch.no_grad():
        packed = pipe(prompt_embeds=inputs["prompt_embeds"], pooled_prompt_embeds=inputs["pooled_prompt_embeds"],
                      latents=inputs["latents"], height=case["height"], width=case["width"],
                      num_inference_steps=case["steps"], guidance_scale=case["guidance"], output_type="latent").images
    final = FluxPipeline._unpack_latents(packed, case["height"], case["width"], pipe.vae_scale_factor)
    save_file({"latents": final.contiguous(), "timesteps": pipe.scheduler.timesteps.to(torch.int64).contiguous(),
               "sigmas": pipe.scheduler.sigmas.to(torch.float32).contiguous()}, OUT / "flux_dpm.safetensors")
    print(len(cases), "cases;", len(tensors), "tensors; flux dpm latents", tuple(final.shape),
          float(final.abs().max()), "timesteps", pipe.scheduler.timesteps.tolist())


if __name__ == "__main__":
    main()
