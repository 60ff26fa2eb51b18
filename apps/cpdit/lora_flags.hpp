#pragma once
// --lora FILE[:WEIGHT] (repeatable), --lora-2 (Wan 2.2's low-noise expert, generate only) and --lora-merge,
// on generate and forward: the adapters a run applies
// (nn/lora.hpp). A weight that is not a finite number is refused while the flags are read; the files are
// read and matched to the model when it runs.
#include <cpdit/pipeline/request.hpp>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cpdit::app {

struct LoraFlags {
  std::vector<std::string> specs, low_noise_specs;  // FILE[:WEIGHT], as given
  bool merge = false;
};

// `experts`: the command runs Wan 2.2's two experts (generate), so --lora-2 is offered.
void add_lora_flags(CLI::App& cmd, LoraFlags& flags, bool experts);

// The adapters of the flags: the weight after a FILE's last colon when it reads whole as a number (a path
// may hold colons of its own), else 1.
std::vector<pipeline::LoraChoice> lora_choices(const LoraFlags& flags);

}  // namespace cpdit::app
