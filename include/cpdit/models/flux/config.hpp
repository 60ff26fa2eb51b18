#pragma once
// FluxTransformer2DModel hyper-parameters (diffusers config.json names; spec/models.md §1.1).
#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace cpdit::models::flux {

// Defaults are FLUX.1-dev's.
struct FluxConfig {
  int64_t patch_size = 1;
  int64_t in_channels = 64;
  int64_t out_channels = 0;  // 0 (config null): same as in_channels
  int64_t num_layers = 19;
  int64_t num_single_layers = 38;
  int64_t attention_head_dim = 128;
  int64_t num_attention_heads = 24;
  int64_t joint_attention_dim = 4096;
  int64_t pooled_projection_dim = 768;
  bool guidance_embeds = true;
  std::vector<int64_t> axes_dims_rope{16, 56, 56};

  int64_t inner_dim() const { return attention_head_dim * num_attention_heads; }
  int64_t output_channels() const { return out_channels > 0 ? out_channels : in_channels; }
  int64_t mlp_dim() const { return 4 * inner_dim(); }

  // Fields missing from `j` keep the values of `base`; unknown fields are ignored (diffusers adds
  // "_class_name" and the like).
  static FluxConfig from_json(const nlohmann::json& j, FluxConfig base);
  // Everything the tensors tell (widths, block counts, guidance, head dim from the QK-norm width) from
  // a diffusers-layout state dict; RoPE axes keep the FLUX.1 default.
  static FluxConfig infer(const nn::StateDict& state);
  // Throws invalid_argument naming the field (axes must sum to the head dim, counts positive...).
  void validate() const;
};

}  // namespace cpdit::models::flux
