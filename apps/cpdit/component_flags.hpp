#pragma once
// The flags that give a pipeline's components as single files, alone or over a --model folder's, as
// ComfyUI and stable-diffusion.cpp users hold them: --transformer FILE, --vae FILE [--vae-config],
// --clip-l / --t5xxl / --umt5 FILE (text encoders of that class), --text-encoder FILE (any class, by its
// tensors) and --tokenizer DIR (repeatable, each put where its kind is read). pipeline::Pipeline::open
// checks them against the family.
#include <cpdit/pipeline/pipeline.hpp>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace cpdit::app {

struct ComponentFlags {
  std::string clip_l, t5xxl, umt5;
  std::vector<std::string> text_encoders, tokenizers;
};

// --transformer goes into `model_group` (a file alone stands for the model); the rest beside it.
void add_component_flags(CLI::App& cmd, CLI::Option_group& model_group, pipeline::PipelineSource& source,
                         ComponentFlags& flags);

// The text encoder files and tokenizer folders of the flags, into `source`.
void apply_component_flags(const ComponentFlags& flags, pipeline::PipelineSource& source);

}  // namespace cpdit::app
