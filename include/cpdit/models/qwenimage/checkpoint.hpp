#pragma once
// Reading Qwen-Image transformer weights in the diffusers layout: a folder with config.json and
// diffusion_pytorch_model[-0000k-of-0000n].safetensors [+ index], an index json, or one file (a GGUF
// file too, its names maybe behind ComfyUI's model.diffusion_model. prefix).
#include <cpdit/models/qwenimage/model.hpp>
#include <cpdit/models/registry.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::models::qwenimage {

struct QwenImageCheckpoint {
  QwenImageConfig config;
  nn::StateDict state;  // diffusers keys
};

// The config is inferred from the tensors, then overridden field by field by `config_path`, else by
// the folder's config.json.
QwenImageCheckpoint read_qwenimage_checkpoint(const std::string& path,
                                              const std::optional<std::string>& config_path = {});

// A model with the checkpoint's weights bound (shared with the state dict where already in the
// target dtype).
std::unique_ptr<QwenImageTransformer2DModel> load_qwenimage(const QwenImageCheckpoint& checkpoint,
                                                            const nn::LoadOptions& options = {});

// The checkpoint as the model registry hands models out (weights converted once, shared by replicas).
LoadedModel share_qwenimage(QwenImageCheckpoint checkpoint, const nn::LoadOptions& options = {});

}  // namespace cpdit::models::qwenimage
