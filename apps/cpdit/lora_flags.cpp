#include "lora_flags.hpp"

#include <cpdit/core/error.hpp>

#include <cmath>
#include <cstdlib>

namespace cpdit::app {

void add_lora_flags(CLI::App& cmd, LoraFlags& flags) {
  cmd.add_option("--lora", flags.specs,
                 "a LoRA adapter: FILE[:WEIGHT] (default weight 1; repeat for several, which add up), in diffusers/"
                 "PEFT, kohya, ComfyUI or musubi-tuner layout, applied beside the base weights (which stay as "
                 "loaded: mapped, bf16 or GGUF-quantised); a module that names no layer of the model is refused")
      ->type_name("FILE[:WEIGHT]");
  cmd.add_flag("--lora-merge", flags.merge,
               "merge the adapters into the weights they touch once per process (diffusers' fuse_lora): no cost per "
               "step, a copy of each such weight; dense weights only (a GGUF-quantised base is refused)");
}

std::vector<pipeline::LoraChoice> lora_choices(const LoraFlags& flags) {
  std::vector<pipeline::LoraChoice> choices;
  for (const std::string& spec : flags.specs) {
    pipeline::LoraChoice choice{spec, 1.0, flags.merge};
    const size_t colon = spec.rfind(':');
    if (colon != std::string::npos && colon > 0) {
      const std::string weight = spec.substr(colon + 1);
      char* end = nullptr;
      const double w = std::strtod(weight.c_str(), &end);
      if (!weight.empty() && end == weight.c_str() + weight.size()) {
        CPDIT_CHECK(std::isfinite(w), invalid_argument, "--lora ", spec, ": the weight must be a finite number");
        choice.path = spec.substr(0, colon);
        choice.weight = w;
      }
    }
    choices.push_back(choice);
  }
  CPDIT_CHECK(!flags.merge || !choices.empty(), invalid_argument, "--lora-merge goes with --lora");
  return choices;
}

}  // namespace cpdit::app
