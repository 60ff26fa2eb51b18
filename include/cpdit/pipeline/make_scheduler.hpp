#pragma once
// The scheduler a request chose (SchedulerChoice), built from its family's own schedule the way
// diffusers' `X.from_config(pipe.scheduler.config, use_flow_sigmas=True, prediction_type="flow_prediction")`
// carries a config over: the training steps and the shift go with it (a static shift as flow_shift or
// shift, dynamic shifting by μ with its line), what the new class has no key for (shift_terminal for
// DPM++ 2M) stays behind. --flow-shift replaces the shift and turns dynamic shifting off.
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/scheduler.hpp>
#include <cpdit/pipeline/unipc.hpp>

#include <memory>

namespace cpdit::pipeline {

// FLUX.1, Qwen-Image, LTX-Video: "euler" (the default), "euler_a", "dpm++2m".
std::unique_ptr<Scheduler> make_scheduler(const SchedulerChoice& choice, const FlowMatchEulerConfig& family);
// Wan, SkyReels-V2: "unipc" (the default), "dpm++2m".
std::unique_ptr<Scheduler> make_scheduler(const SchedulerChoice& choice, const UniPCConfig& family);

}  // namespace cpdit::pipeline
