#include "scheduler_flags.hpp"

#include "option_checks.hpp"

namespace cpdit::app {

void add_scheduler_flags(CLI::App& cmd, pipeline::SchedulerChoice& choice) {
  cmd.add_option_function<std::string>(
         "--scheduler,--sampler",
         [&choice](const std::string& name) {
           pipeline::check_scheduler_name(name);
           choice.name = name;
         },
         "the sampler: euler (flow-match Euler), euler_a (Euler ancestral: fresh noise from --seed at every step), "
         "dpm++2m (DPM++ 2M, diffusers' DPMSolverMultistepScheduler on flow sigmas), unipc (UniPC); each family's: " +
             pipeline::family_scheduler_choices())
      ->type_name("NAME");
  cmd.add_option("--flow-shift", choice.flow_shift,
                 "a static shift of the sigmas, s·σ/(1 + (s − 1)·σ), in place of the family's (FLUX.1's dynamic "
                 "shift by image size, Wan's flow_shift 3)")
      ->check(finite_number());
  cmd.add_option_function<std::string>(
         "--sigmas", [&choice](const std::string& text) { choice.sigmas = pipeline::parse_sigmas(text); },
         "custom sigmas, descending in (0, 1], e.g. \"1.0,0.75,0.5,0.25\" (diffusers' sigmas=; still shifted by the "
         "schedule's shift); the steps are their count; not with dpm++2m")
      ->type_name("LIST");
}

}  // namespace cpdit::app
