#include <cpdit/core/error.hpp>
#include <cpdit/models/vae/config.hpp>
#include <cpdit/nn/config_inference.hpp>

namespace cpdit::models::vae {

using nn::read_config_field;

KLConfig KLConfig::from_json(const nlohmann::json& j) {
  KLConfig c;
  try {
    read_config_field(j, "in_channels", c.in_channels);
    read_config_field(j, "out_channels", c.out_channels);
    read_config_field(j, "latent_channels", c.latent_channels);
    read_config_field(j, "block_out_channels", c.block_out_channels);
    read_config_field(j, "layers_per_block", c.layers_per_block);
    read_config_field(j, "norm_num_groups", c.norm_num_groups);
    read_config_field(j, "mid_block_add_attention", c.mid_block_add_attention);
    read_config_field(j, "use_quant_conv", c.use_quant_conv);
    read_config_field(j, "use_post_quant_conv", c.use_post_quant_conv);
    read_config_field(j, "scaling_factor", c.scaling_factor);
    read_config_field(j, "shift_factor", c.shift_factor);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::invalid_argument, "AutoencoderKL config: ", e.what());
  }
  CPDIT_CHECK(!c.block_out_channels.empty() && c.layers_per_block >= 1 && c.norm_num_groups >= 1 &&
                  c.latent_channels >= 1 && c.out_channels >= 1,
              invalid_argument, "AutoencoderKL config: block_out_channels, layers_per_block, norm_num_groups and "
              "the channel counts must be positive");
  for (int64_t ch : c.block_out_channels)
    CPDIT_CHECK(ch > 0 && ch % c.norm_num_groups == 0, invalid_argument, "AutoencoderKL config: ", ch,
                " channels do not split into norm_num_groups ", c.norm_num_groups);
  return c;
}

WanVaeConfig WanVaeConfig::from_json(const nlohmann::json& j) {
  WanVaeConfig c;
  bool is_residual = false;
  nlohmann::json patch_size;
  try {
    read_config_field(j, "base_dim", c.base_dim);
    read_config_field(j, "decoder_base_dim", c.decoder_base_dim);
    read_config_field(j, "z_dim", c.z_dim);
    read_config_field(j, "in_channels", c.in_channels);
    read_config_field(j, "input_channels", c.in_channels);  // Qwen-Image's name, for the input and the output
    read_config_field(j, "input_channels", c.out_channels);
    read_config_field(j, "out_channels", c.out_channels);
    read_config_field(j, "dim_mult", c.dim_mult);
    read_config_field(j, "num_res_blocks", c.num_res_blocks);
    read_config_field(j, "attn_scales", c.attn_scales);
    read_config_field(j, "temperal_downsample", c.temperal_downsample);
    read_config_field(j, "latents_mean", c.latents_mean);
    read_config_field(j, "latents_std", c.latents_std);
    read_config_field(j, "is_residual", is_residual);
    if (j.contains("patch_size")) patch_size = j["patch_size"];
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::invalid_argument, "AutoencoderKLWan config: ", e.what());
  }
  CPDIT_CHECK(!is_residual && (patch_size.is_null() || patch_size == 1), unsupported,
              "AutoencoderKLWan config: the Wan 2.2 layout (is_residual, patch_size) is not supported; "
              "Wan 2.1 and Qwen-Image VAEs are");
  CPDIT_CHECK(c.dim_mult.size() >= 1 && c.temperal_downsample.size() + 1 == c.dim_mult.size(), invalid_argument,
              "AutoencoderKLWan config: temperal_downsample needs one entry per dim_mult entry but the last (",
              c.dim_mult.size(), " dim_mult, ", c.temperal_downsample.size(), " temperal_downsample)");
  CPDIT_CHECK(c.base_dim > 0 && c.decoder_dim() > 0 && c.z_dim > 0 && c.num_res_blocks >= 0 && c.in_channels > 0 &&
                  c.out_channels > 0,
              invalid_argument, "AutoencoderKLWan config: base_dim, z_dim, in_channels, out_channels must be positive");
  CPDIT_CHECK(c.latents_mean.empty() || (int64_t(c.latents_mean.size()) == c.z_dim &&
                                         int64_t(c.latents_std.size()) == c.z_dim),
              invalid_argument, "AutoencoderKLWan config: latents_mean/latents_std need z_dim = ", c.z_dim,
              " values each");
  return c;
}

}  // namespace cpdit::models::vae
