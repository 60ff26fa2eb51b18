#pragma once
// FluxTransformer2DModel hyper-parameters (diffusers config.json names).
#include <cpdit/models/common/config.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace cpdit::models::flux {

// Defaults are FLUX.1-dev's: 24 heads of 128, 64 input channels, 19 double-stream blocks (num_layers);
// out_channels 0 (config null) means the same as in_channels.
struct FluxConfig : common::TransformerConfig {
  FluxConfig() : TransformerConfig{24, 128, 64, 0, 19} {}

  int64_t patch_size = 1;
  int64_t num_single_layers = 38;
  int64_t joint_attention_dim = 4096;
  int64_t pooled_projection_dim = 768;
  bool guidance_embeds = true;
  std::vector<int64_t> axes_dims_rope{16, 56, 56};

  int64_t output_channels() const { return out_channels > 0 ? out_channels : in_channels; }
  int64_t mlp_dim() const { return 4 * inner_dim(); }

  // Fields missing from `j` keep the values of `base`; unknown fields are ignored (diffusers adds
  // "_class_name" and the like).
  static FluxConfig from_json(const nlohmann::json& j, FluxConfig base);
  // Every field from_json reads (nn::config_json writes them back).
  std::vector<nn::ConfigField> fields();
  // Everything the tensors tell (widths, block counts, guidance, head dim from the QK-norm width) from
  // a diffusers-layout state dict; RoPE axes keep the FLUX.1 default.
  static FluxConfig infer(const nn::StateDict& state);
  // Throws invalid_argument naming the field (axes must sum to the head dim, counts positive...).
  void validate() const;
};

}  // namespace cpdit::models::flux
