#pragma once
// Where a model's weights and config are, for every layout a checkpoint is downloaded in: the one
// place that knows the folder layouts of diffusers and transformers.
//
//   DIR with config.json and diffusion_pytorch_model.safetensors[.index.json] (diffusers) or
//       model.safetensors[.index.json] (transformers)
//   FILE.safetensors or FILE.safetensors.index.json, with a config.json beside it or none
//   a diffusers pipeline folder: model_index.json naming its components, each in its own folder
//       (transformer/, vae/, text_encoder/, text_encoder_2/, tokenizer/, scheduler/, ...)
#include <optional>
#include <string>

namespace cpdit::io {

struct ModelFiles {
  std::string weights;                // a .safetensors file or a *.safetensors.index.json
  std::optional<std::string> config;  // its config.json, when there is one
};

// `component` picks the folder of a pipeline folder (and is ignored otherwise); `config` overrides
// the config found. A path that holds no weights, or a pipeline without `component`, is a one-line
// Error saying what was looked for.
ModelFiles resolve_model(const std::string& path, const std::string& component = "transformer",
                         const std::optional<std::string>& config = std::nullopt);

// The config.json resolve_model picks (`config`, else the model folder's, else the one beside the
// file), without looking for the weights: a model's class can be told before its weights are sought.
std::optional<std::string> resolve_config(const std::string& path, const std::string& component = "transformer",
                                          const std::optional<std::string>& config = std::nullopt);

// The folder of `component` (e.g. "scheduler") when `path` is a diffusers pipeline folder that has
// it; nullopt otherwise.
std::optional<std::string> pipeline_component(const std::string& path, const std::string& component);

}  // namespace cpdit::io
