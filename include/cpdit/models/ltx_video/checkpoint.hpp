#pragma once
// Reading LTX-Video transformer weights in the diffusers layout: a folder with config.json and
// diffusion_pytorch_model[-0000k-of-0000n].safetensors [+ index], an index json, one file, or the
// `transformer` of a pipeline folder; or in the original release's names (a single file or its GGUF
// conversion), renamed to diffusers' on reading.
#include <cpdit/models/ltx_video/model.hpp>
#include <cpdit/models/registry.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::models::ltx_video {

struct LtxVideoCheckpoint {
  LtxVideoConfig config;
  nn::StateDict state;  // diffusers keys
};

// The config is inferred from the tensors (head_dim 64 for what they cannot tell), then overridden
// field by field by `config_path`, else by the folder's config.json.
LtxVideoCheckpoint read_ltx_video_checkpoint(const std::string& path,
                                             const std::optional<std::string>& config_path = {});

// A model with the checkpoint's weights bound (shared with the state dict where already in the
// target dtype).
std::unique_ptr<LTXVideoTransformer3DModel> load_ltx_video(const LtxVideoCheckpoint& checkpoint,
                                                           const nn::LoadOptions& options = {});

// The checkpoint as the model registry hands a model out: converted once, shared by every replica.
LoadedModel share_ltx_video(LtxVideoCheckpoint checkpoint, const nn::LoadOptions& options = {});

}  // namespace cpdit::models::ltx_video
