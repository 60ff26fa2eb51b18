#pragma once
// The configs of the VAEs, read from a diffusers config.json (defaults are diffusers' defaults for
// fields the file leaves out or sets to null).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace cpdit::models::vae {

// AutoencoderKL (FLUX.1's: 16 latent channels, no quant convs). scaling_factor and shift_factor are
// the pipeline's business: it decodes latents / scaling_factor + shift_factor.
struct KLConfig {
  int64_t in_channels = 3, out_channels = 3, latent_channels = 4;
  std::vector<int64_t> block_out_channels{64};
  int64_t layers_per_block = 1;
  int64_t norm_num_groups = 32;
  bool mid_block_add_attention = true;
  bool use_quant_conv = true, use_post_quant_conv = true;
  double scaling_factor = 0.18215, shift_factor = 0.0;

  static KLConfig from_json(const nlohmann::json& j);  // checks what the decoder relies on
};

// AutoencoderKLWan (Wan 2.1's layout; Qwen-Image's VAE is the same architecture). The pipeline
// decodes latents * latents_std + latents_mean, per channel.
struct WanVaeConfig {
  int64_t base_dim = 96, decoder_base_dim = 0;  // 0: same as base_dim
  int64_t z_dim = 16, in_channels = 3, out_channels = 3;  // Qwen-Image's config names both input_channels
  std::vector<int64_t> dim_mult{1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  std::vector<double> attn_scales;
  std::vector<bool> temperal_downsample{false, true, true};
  std::vector<double> latents_mean, latents_std;

  int64_t decoder_dim() const { return decoder_base_dim > 0 ? decoder_base_dim : base_dim; }
  static WanVaeConfig from_json(const nlohmann::json& j);  // refuses what is not built (Wan 2.2's)
};

}  // namespace cpdit::models::vae
