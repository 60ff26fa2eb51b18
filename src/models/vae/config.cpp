// KLConfig and WanVaeConfig from a diffusers config.json: each VAE's fields as a list read by
// nn::read_config_fields (the reader every model's config goes through), then the checks its
// decoder relies on.
#include <cpdit/core/error.hpp>
#include <cpdit/models/vae/config.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models::vae {

KLConfig KLConfig::from_json(const nlohmann::json& j) {
  KLConfig c;
  nn::read_config_fields(j, "AutoencoderKL",
                         {{"in_channels", c.in_channels},
                          {"out_channels", c.out_channels},
                          {"latent_channels", c.latent_channels},
                          {"block_out_channels", c.block_out_channels},
                          {"layers_per_block", c.layers_per_block},
                          {"norm_num_groups", c.norm_num_groups},
                          {"mid_block_add_attention", c.mid_block_add_attention},
                          {"use_quant_conv", c.use_quant_conv},
                          {"use_post_quant_conv", c.use_post_quant_conv},
                          {"scaling_factor", c.scaling_factor},
                          {"shift_factor", c.shift_factor}});
  nn::require_positive("AutoencoderKL", {{"in_channels", c.in_channels},
                                         {"out_channels", c.out_channels},
                                         {"latent_channels", c.latent_channels},
                                         {"layers_per_block", c.layers_per_block},
                                         {"norm_num_groups", c.norm_num_groups}});
  CPDIT_CHECK(!c.block_out_channels.empty(), invalid_argument, "AutoencoderKL config: block_out_channels is empty");
  for (int64_t ch : c.block_out_channels)
    CPDIT_CHECK(ch > 0 && ch % c.norm_num_groups == 0, invalid_argument, "AutoencoderKL config: ", ch,
                " channels do not split into norm_num_groups ", c.norm_num_groups);
  return c;
}

WanVaeConfig WanVaeConfig::from_json(const nlohmann::json& j) {
  WanVaeConfig c;
  // Wan 2.2's fields, read only to refuse a layout the decoder does not build.
  bool is_residual = false;
  int64_t patch_size = 1;
  // Qwen-Image's VAE names its input and output channels both `input_channels`; a config that names
  // in_channels or out_channels too has them win, as they are read last.
  nn::read_config_fields(j, "AutoencoderKLWan",
                         {{"base_dim", c.base_dim},
                          {"decoder_base_dim", c.decoder_base_dim},
                          {"z_dim", c.z_dim},
                          {"input_channels", c.in_channels},
                          {"input_channels", c.out_channels},
                          {"in_channels", c.in_channels},
                          {"out_channels", c.out_channels},
                          {"dim_mult", c.dim_mult},
                          {"num_res_blocks", c.num_res_blocks},
                          {"attn_scales", c.attn_scales},
                          {"temperal_downsample", c.temperal_downsample},
                          {"latents_mean", c.latents_mean},
                          {"latents_std", c.latents_std},
                          {"is_residual", is_residual},
                          {"patch_size", patch_size}});
  CPDIT_CHECK(!is_residual && patch_size == 1, unsupported,
              "AutoencoderKLWan config: the Wan 2.2 layout (is_residual, patch_size) is not supported; "
              "Wan 2.1 and Qwen-Image VAEs are");
  CPDIT_CHECK(c.dim_mult.size() >= 1 && c.temperal_downsample.size() + 1 == c.dim_mult.size(), invalid_argument,
              "AutoencoderKLWan config: temperal_downsample needs one entry per dim_mult entry but the last (",
              c.dim_mult.size(), " dim_mult, ", c.temperal_downsample.size(), " temperal_downsample)");
  nn::require_positive("AutoencoderKLWan", {{"base_dim", c.base_dim},
                                            {"decoder_base_dim", c.decoder_dim()},
                                            {"z_dim", c.z_dim},
                                            {"in_channels", c.in_channels},
                                            {"out_channels", c.out_channels}});
  CPDIT_CHECK(c.num_res_blocks >= 0, invalid_argument, "AutoencoderKLWan config: num_res_blocks must be >= 0, got ",
              c.num_res_blocks);
  CPDIT_CHECK(c.latents_mean.empty() || (int64_t(c.latents_mean.size()) == c.z_dim &&
                                         int64_t(c.latents_std.size()) == c.z_dim),
              invalid_argument, "AutoencoderKLWan config: latents_mean/latents_std need z_dim = ", c.z_dim,
              " values each");
  return c;
}

}  // namespace cpdit::models::vae
