#pragma once
// QwenImageTransformer2DModel hyper-parameters (diffusers config.json names).
#include <cpdit/models/common/config.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>

namespace cpdit::models::qwenimage {

// Defaults are diffusers' class defaults (the released 20B widths): 24 heads of 128, 64 input
// channels (2x2-packed 16 latent channels), 60 dual-stream blocks; out_channels 0 (config null) means
// the same as in_channels.
struct QwenImageConfig : common::TransformerConfig {
  QwenImageConfig() : TransformerConfig{24, 128, 64, 16, 60} {}

  int64_t patch_size = 2;
  int64_t joint_attention_dim = 3584;
  std::array<int64_t, 3> axes_dims_rope{16, 56, 56};  // frame, height, width
  // Edit-2511: the first image segment (the image being made) is modulated by t, the later ones (the
  // condition images) by t = 0; text and the output head by t.
  bool zero_cond_t = false;
  // Variants this port does not run yet; each must stay false.
  bool guidance_embeds = false;
  bool use_additional_t_cond = false;
  bool use_layer3d_rope = false;

  int64_t output_channels() const { return out_channels > 0 ? out_channels : in_channels; }

  // Fields missing (or null) in `j` keep the values of `base`; unknown fields are ignored.
  static QwenImageConfig from_json(const nlohmann::json& j, QwenImageConfig base);
  // Every field from_json reads (nn::config_json writes them back).
  std::vector<nn::ConfigField> fields();
  // What the tensors tell (widths, channels, head dim from the q/k norm, block count); the patch size
  // and RoPE axes keep their defaults.
  static QwenImageConfig infer(const nn::StateDict& state);
  // Throws invalid_argument naming the field; the variants above are refused as unsupported.
  void validate() const;
};

}  // namespace cpdit::models::qwenimage
