#pragma once
// Reading FLUX.1 transformer weights: the diffusers layout (a folder with config.json and
// diffusion_pytorch_model[-0000k-of-0000n].safetensors [+ index]) or the original single-file
// release (flux1-dev.safetensors: fused qkv, swapped final-norm halves).
#include <cpdit/models/flux/model.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/key_layout.hpp>

#include <memory>
#include <optional>
#include <string>

namespace cpdit::models::flux {

// The original (Black Forest Labs) names of the transformer's tensors and diffusers' for them, for
// the other files that use them (LoRA adapters: nn/lora.hpp).
const nn::KeyLayout& original_names();

// True for the original (Black Forest Labs) key layout, with or without ComfyUI's
// "model.diffusion_model." prefix.
bool is_original_layout(const nn::StateDict& state);

// The original layout renamed and re-cut into diffusers keys (views, no copies, except the
// final-norm rows, whose halves swap). A diffusers state dict comes back unchanged; keys that have
// no diffusers name pass through, so the loader reports them as unexpected.
nn::StateDict to_diffusers_layout(const nn::StateDict& state);

struct FluxCheckpoint {
  FluxConfig config;
  nn::StateDict state;  // diffusers keys
};

// `path`: a folder (config.json beside the weights), an index json, or one .safetensors file.
// The config is inferred from the tensors (FLUX.1 defaults for what they cannot tell: RoPE axes,
// patch size), then overridden field by field by `config_path`, else by the folder's config.json.
FluxCheckpoint read_flux_checkpoint(const std::string& path, const std::optional<std::string>& config_path = {});

// A model with the checkpoint's weights bound (weights already in the target dtype are shared with
// the checkpoint's state dict, so models built from one checkpoint share their weights).
std::unique_ptr<FluxTransformer2DModel> load_flux(const FluxCheckpoint& checkpoint,
                                                  const nn::LoadOptions& options = {});

// The checkpoint as the model registry hands a model out: its weights converted to `options`' dtypes
// once, here, and shared by every replica.
LoadedModel share_flux(FluxCheckpoint checkpoint, const nn::LoadOptions& options = {});

}  // namespace cpdit::models::flux
