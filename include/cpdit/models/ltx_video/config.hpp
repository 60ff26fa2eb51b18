#pragma once
// LTXVideoTransformer3DModel hyper-parameters (diffusers config.json names).
#include <cpdit/models/common/config.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace cpdit::models::ltx_video {

// Defaults are diffusers' class defaults (the 2B widths): 32 heads of 64, 128 latent channels in and
// out, 28 blocks, T5-XXL text (4096) projected to the inner width. out_channels 0 (config null) means
// the same as in_channels.
struct LtxVideoConfig : common::TransformerConfig {
  LtxVideoConfig() : TransformerConfig{32, 64, 128, 128, 28} {}

  int64_t patch_size = 1;    // rows and columns per token: scales the RoPE coordinates only
  int64_t patch_size_t = 1;  // frames per token: likewise
  int64_t cross_attention_dim = 2048;
  int64_t caption_channels = 4096;
  float norm_eps = 1e-6f;
  // Variants diffusers' class accepts but no released checkpoint uses; each must keep its default.
  std::string activation_fn = "gelu-approximate";
  std::string qk_norm = "rms_norm_across_heads";
  bool norm_elementwise_affine = false;
  bool attention_bias = true;
  bool attention_out_bias = true;

  int64_t output_channels() const { return out_channels > 0 ? out_channels : in_channels; }

  // Fields missing (or null) in `j` keep the values of `base`; unknown fields are ignored.
  static LtxVideoConfig from_json(const nlohmann::json& j, LtxVideoConfig base);
  // Every field from_json reads (nn::config_json writes them back).
  std::vector<nn::ConfigField> fields();
  // What the tensors tell (widths, channels, caption width, block count); the head split of the width
  // cannot be told (the q/k norm spans all heads): head_dim stays 64, the released models' value.
  static LtxVideoConfig infer(const nn::StateDict& state);
  // Throws invalid_argument naming the field; the variants above are refused as unsupported.
  void validate() const;
};

}  // namespace cpdit::models::ltx_video
