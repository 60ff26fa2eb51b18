#pragma once
// The step loop every family's denoising loop runs (FLUX.1, Qwen-Image, LTX-Video, Wan, SkyReels-V2's
// iterations): each step timed, then the step hook — Pipeline's NaN watch, progress, the step callback
// on the latents and cancellation agreed over the ranks (pipeline.hpp), and the place where per-step work
// such as step caches or LoRA scaling plugs in — so no family writes its own.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace cpdit::pipeline {

// A loop's latents as the step hook may read and replace them: the loop's own variable (the layout
// diffusers' pipeline holds between steps), this rank's part of it when the loop keeps it split.
struct LoopLatents {
  Tensor* latents = nullptr;  // null: the loop keeps no one latents tensor (SkyReels-V2's frames)
  int split_dim = -1;         // >= 0: each rank of `group` holds its part along it (parallel::shard's rule)
  comm::Communicator* group = nullptr;
  std::function<double(int)> timestep;  // the scheduler's timestep of the loop's step i (diffusers' `t`)
};

// What the hook sees of one finished step: the loop's latents, and the step's timestep.
struct StepLatents {
  Tensor* latents = nullptr;  // as LoopLatents: the loop's own, so assigning replaces them
  int split_dim = -1;
  comm::Communicator* group = nullptr;
  double timestep = 0;
};

// Called on every rank after each step: (the step's place among the loop's steps, 0-based; the loop's
// steps in all; the step's seconds; the step's latents). Returns whether the loop goes on (false: the
// loop ends there and its latents are its result, as after diffusers' pipe._interrupt); it may throw to
// end the run.
using StepHook = std::function<bool(int step, int total, double seconds, const StepLatents& latents)>;

// step(i) for i in [first, end), each one's seconds appended to `seconds`, until the hook says to stop;
// the hook numbers a step by how many `seconds` held before it (so one loop may run in several calls, as
// SkyReels-V2's chunks do) out of `total`, and sees `latents` after it.
void run_steps(int first, int end, const std::function<void(int)>& step, const StepHook& hook, int total,
               std::vector<double>& seconds, const LoopLatents& latents = {});

// Request::on_step_latents: (step, timestep, the whole latents) -> the latents that replace them, or nullopt.
using LatentsEdit = std::function<std::optional<Tensor>(int step, double timestep, const Tensor& latents)>;

// The step callback's part of the step hook, called by every rank of `world` after the same step
// (collective when `world` has more than one rank): the rank given `edit` (rank 0; null on the others)
// calls it with the whole latents, gathered over their group when split, and what it returns replaces
// every rank's latents (its part of them), broadcast from rank 0, so every split stays exact.
void edit_step_latents(const LatentsEdit& edit, int step, const StepLatents& latents, comm::Communicator& world);

}  // namespace cpdit::pipeline
