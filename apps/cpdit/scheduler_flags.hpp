#pragma once
// --scheduler (alias --sampler, sd.cpp's word), --flow-shift and --sigmas: the request's SchedulerChoice.
// A name no family takes and a --sigmas list that is not numbers are refused while the flags are read,
// before any model is opened; a name the model's family does not take is refused when the pipeline runs.
#include <cpdit/pipeline/scheduler.hpp>

#include <CLI/CLI.hpp>

namespace cpdit::app {

void add_scheduler_flags(CLI::App& cmd, pipeline::SchedulerChoice& choice);

}  // namespace cpdit::app
