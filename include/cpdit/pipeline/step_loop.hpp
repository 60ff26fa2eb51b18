#pragma once
// The step loop every family's denoising loop runs (FLUX.1, Qwen-Image, LTX-Video, Wan, SkyReels-V2's
// iterations): each step timed, then the step hook — Pipeline's NaN watch, progress and cancellation
// agreed over the ranks (pipeline.hpp), and the place where per-step work such as step caches or LoRA
// scaling plugs in — so no family writes its own.
#include <functional>
#include <vector>

namespace cpdit::pipeline {

// Called on every rank after each step: (the step's place among the loop's steps, 0-based; the loop's
// steps in all; the step's seconds). It may throw to end the loop.
using StepHook = std::function<void(int step, int total, double seconds)>;

// step(i) for i in [first, end), each one's seconds appended to `seconds`; the hook numbers a step by
// how many `seconds` held before it (so one loop may run in several calls, as SkyReels-V2's chunks do)
// out of `total`.
void run_steps(int first, int end, const std::function<void(int)>& step, const StepHook& hook, int total,
               std::vector<double>& seconds);

}  // namespace cpdit::pipeline
