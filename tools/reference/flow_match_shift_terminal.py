"""Reference for FlowMatchEulerScheduler with the options Qwen-Image and LTX-Video ship: dynamic
exponential shifting with their own μ line, and `shift_terminal` (the schedule stretched so that its
last σ is the terminal value). diffusers' own FlowMatchEulerDiscreteScheduler computes every number,
driven as the pipelines drive it: σ_in = numpy.linspace(1, 1/N, N) and μ from calculate_shift.

Writes tests/data/fixtures/scheduler_shift_terminal/ in the layout of fixtures/scheduler/:
  scheduler.json                configs (the scheduler's own config dicts) and cases: key, config,
                                image_seq_len, num_inference_steps, mu, timesteps, sigmas, steps
                                (step_index, timestep, sigma, sigma_next)
  scheduler_steps.safetensors   <key>/step<i>/{sample, model_output, prev_sample} (1, 16, 8) float32

    OMP_NUM_THREADS=1 /work/venv/bin/python tools/reference/flow_match_shift_terminal.py
"""
import json
import pathlib

import diffusers
import numpy as np
import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift
from safetensors.torch import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/data/fixtures/scheduler_shift_terminal"

CONFIGS = {
    # Qwen-Image's scheduler/scheduler_config.json.
    "qwenimage": dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
                      base_image_seq_len=256, max_image_seq_len=8192, shift_terminal=0.02,
                      time_shift_type="exponential"),
    # LTX-Video's: its own μ line and terminal 0.1.
    "ltx_video": dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.95,
                      max_shift=2.05, base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=0.1,
                      time_shift_type="exponential"),
    # A static shift stretched to a terminal: the stretch after the other branch of the shift.
    "static_terminal": dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False, shift_terminal=0.05),
}
CASES = [("qwenimage", 1024, 4), ("qwenimage", 4096, 20), ("qwenimage", 4096, 50), ("qwenimage", 16384, 8),
         ("ltx_video", 4096, 8), ("ltx_video", 6144, 40), ("static_terminal", 1024, 10), ("static_terminal", 256, 2)]


def main():
    g = torch.Generator().manual_seed(11)
    configs = {name: dict(FlowMatchEulerDiscreteScheduler(**c).config) for name, c in CONFIGS.items()}
    cases, tensors = [], {}
    for name, seq, n in CASES:
        scheduler = FlowMatchEulerDiscreteScheduler.from_config(configs[name])
        c = scheduler.config
        mu = calculate_shift(seq, c.get("base_image_seq_len", 256), c.get("max_image_seq_len", 4096),
                             c.get("base_shift", 0.5), c.get("max_shift", 1.15))
        sigmas_in = np.linspace(1.0, 1 / n, n)
        scheduler.set_timesteps(sigmas=sigmas_in, mu=mu)
        key = f"{name}/seq{seq}/steps{n}"
        steps = []
        for index in sorted({0, n // 2, n - 1}):
            sample = torch.randn(1, 16, 8, generator=g)
            model_output = torch.randn(1, 16, 8, generator=g)
            t = scheduler.timesteps[index]
            scheduler._step_index = index
            prev = scheduler.step(model_output, t, sample, return_dict=False)[0]
            prefix = f"{key}/step{index}/"
            tensors[prefix + "sample"] = sample
            tensors[prefix + "model_output"] = model_output
            tensors[prefix + "prev_sample"] = prev.contiguous()
            steps.append({"step_index": index, "timestep": float(t), "sigma": float(scheduler.sigmas[index]),
                          "sigma_next": float(scheduler.sigmas[index + 1])})
        cases.append({"key": key, "config": name, "image_seq_len": seq, "num_inference_steps": n, "mu": mu,
                      "timesteps": scheduler.timesteps.tolist(), "sigmas": scheduler.sigmas.tolist(),
                      "steps": steps})
        print(key, "mu", mu, "sigmas", scheduler.sigmas[:2].tolist(), "...", scheduler.sigmas[-2:].tolist())
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scheduler.json").write_text(json.dumps(
        {"diffusers_version": diffusers.__version__, "numpy_version": np.__version__,
         "torch_version": torch.__version__, "configs": configs, "cases": cases}, indent=1) + "\n")
    save_file(tensors, OUT / "scheduler_steps.safetensors")


if __name__ == "__main__":
    main()
