#include "lora_flags.hpp"

#include <cpdit/core/error.hpp>

#include <cmath>
#include <cstdlib>

namespace cpdit::app {

void add_lora_flags(CLI::App& cmd, LoraFlags& flags, bool experts) {
  cmd.add_option("--lora", flags.specs,
                 "a LoRA adapter: FILE[:WEIGHT] (default weight 1; repeat for several, which add up), in diffusers/"
                 "PEFT, kohya, ComfyUI or musubi-tuner layout, applied beside the base weights (which stay as "
                 "loaded: mapped, bf16 or GGUF-quantised); a module that names no layer of the model is refused")
      ->type_name("FILE[:WEIGHT]");
  if (experts)
    cmd.add_option("--lora-2", flags.low_noise_specs,
                   "a LoRA adapter for Wan 2.2's low-noise expert (transformer_2/; diffusers' load_into_transformer_2): "
                   "FILE[:WEIGHT], repeatable; --lora adapts the high-noise transformer/")
        ->type_name("FILE[:WEIGHT]");
  cmd.add_flag("--lora-merge", flags.merge,
               "merge the adapters into the weights they touch once per process (diffusers' fuse_lora): no cost per "
               "step, a copy of each such weight; dense weights only (a GGUF-quantised base is refused)");
}

namespace {
pipeline::LoraChoice lora_choice(const std::string& spec, bool merge, bool low_noise) {
  pipeline::LoraChoice choice{spec, 1.0, merge, low_noise};
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    const std::string weight = spec.substr(colon + 1);
    char* end = nullptr;
    const double w = std::strtod(weight.c_str(), &end);
    if (!weight.empty() && end == weight.c_str() + weight.size()) {
      CPDIT_CHECK(std::isfinite(w), invalid_argument, low_noise ? "--lora-2 " : "--lora ", spec,
                  ": the weight must be a finite number");
      choice.path = spec.substr(0, colon);
      choice.weight = w;
    }
  }
  return choice;
}
}  // namespace

std::vector<pipeline::LoraChoice> lora_choices(const LoraFlags& flags) {
  std::vector<pipeline::LoraChoice> choices;
  for (const std::string& spec : flags.specs) choices.push_back(lora_choice(spec, flags.merge, false));
  for (const std::string& spec : flags.low_noise_specs) choices.push_back(lora_choice(spec, flags.merge, true));
  CPDIT_CHECK(!flags.merge || !choices.empty(), invalid_argument, "--lora-merge goes with --lora");
  return choices;
}

}  // namespace cpdit::app
