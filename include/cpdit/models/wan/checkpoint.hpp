#pragma once
// Reading Wan transformer weights in the diffusers layout: a folder with config.json and
// diffusion_pytorch_model[-0000k-of-0000n].safetensors [+ index], an index json, or one file; or in
// Wan 2.1's original names (a single file or its GGUF conversion), renamed to diffusers' on reading.
#include <cpdit/models/wan/model.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/key_layout.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::models::wan {

// Wan 2.1's original names of the transformer's tensors and diffusers' for them, for the other files
// that use them (LoRA adapters: nn/lora.hpp).
const nn::KeyLayout& original_names();

struct WanCheckpoint {
  WanConfig config;
  nn::StateDict state;  // diffusers keys
};

// The config is inferred from the tensors (head_dim 128 for what they cannot tell), then overridden
// field by field by `config_path`, else by the folder's config.json.
WanCheckpoint read_wan_checkpoint(const std::string& path, const std::optional<std::string>& config_path = {});

// A model with the checkpoint's weights bound (weights already in the target dtype are shared with
// the checkpoint's state dict, so models built from one checkpoint share their weights).
std::unique_ptr<WanTransformer3DModel> load_wan(const WanCheckpoint& checkpoint, const nn::LoadOptions& options = {});

// The checkpoint as the model registry hands a model out: its weights converted to `options`' dtypes
// once, here, and shared by every replica.
LoadedModel share_wan(WanCheckpoint checkpoint, const nn::LoadOptions& options = {});

}  // namespace cpdit::models::wan
