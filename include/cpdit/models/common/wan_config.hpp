#pragma once
// Wan 2.1 hyper-parameters (diffusers config.json names), shared by
// WanTransformer3DModel and SkyReelsV2Transformer3DModel (whose configs add fields these ignore).
#include <cpdit/models/common/config.hpp>

#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace cpdit::models::common::wan {

// Defaults are diffusers' class defaults (the 14B widths): 40 heads of 128, 16 channels in and out,
// 40 blocks.
struct WanConfig : common::TransformerConfig {
  WanConfig() : TransformerConfig{40, 128, 16, 16, 40} {}

  std::array<int64_t, 3> patch_size{1, 2, 2};  // (frames, rows, columns)
  int64_t text_dim = 4096;
  int64_t freq_dim = 256;
  int64_t ffn_dim = 13824;
  bool cross_attn_norm = true;
  std::string qk_norm = "rms_norm_across_heads";
  float eps = 1e-6f;
  int64_t rope_max_seq_len = 1024;
  // Image conditioning (I2V / FLF2V), 0 for null: the width of the image encoder's tokens (CLIP's
  // 1280), and the width add_k_proj / add_v_proj take them in (the model width: they take the image
  // embedder's output). Set together or not at all.
  int64_t image_dim = 0;
  int64_t added_kv_proj_dim = 0;
  // FLF2V: the learned position table over the first and the last image's tokens (2 x 257), 0 for none.
  int64_t pos_embed_seq_len = 0;

  int64_t patch_volume() const { return patch_size[0] * patch_size[1] * patch_size[2]; }

  // Fields missing (or null) in `j` keep the values of `base`; unknown fields are ignored.
  static WanConfig from_json(const nlohmann::json& j, WanConfig base);
  // Every field from_json reads (nn::config_json writes them back).
  std::vector<nn::ConfigField> fields();
  // What the tensors tell (widths, channels, patch, block count) from a diffusers-layout state dict;
  // the head split of the width cannot be told (the QK norm spans all heads): head_dim stays 128.
  static WanConfig infer(const nn::StateDict& state);
  // Throws invalid_argument naming the field.
  void validate() const;
};

}  // namespace cpdit::models::common::wan
