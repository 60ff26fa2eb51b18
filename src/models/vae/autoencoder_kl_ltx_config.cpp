// LtxVaeConfig from a diffusers config.json, with the checks the decoder relies on: list lengths
// that match, and channel counts that chain from block to block as diffusers' arithmetic makes them
// (a config whose blocks do not chain fails inside diffusers too, mid-decode; here at load).
#include <cpdit/core/error.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <algorithm>

namespace cpdit::models::vae {

LtxVaeConfig LtxVaeConfig::from_json(const nlohmann::json& j) {
  LtxVaeConfig c;
  std::vector<bool> inject_noise;
  nn::read_config_fields(j, "AutoencoderKLLTXVideo",
                         {{"latent_channels", c.latent_channels},
                          {"out_channels", c.out_channels},
                          {"decoder_block_out_channels", c.decoder_block_out_channels},
                          {"decoder_layers_per_block", c.decoder_layers_per_block},
                          {"decoder_spatio_temporal_scaling", c.decoder_spatio_temporal_scaling},
                          {"upsample_residual", c.upsample_residual},
                          {"upsample_factor", c.upsample_factor},
                          {"timestep_conditioning", c.timestep_conditioning},
                          {"decoder_causal", c.decoder_causal},
                          {"patch_size", c.patch_size},
                          {"patch_size_t", c.patch_size_t},
                          {"resnet_norm_eps", c.resnet_norm_eps},
                          {"scaling_factor", c.scaling_factor},
                          {"decoder_inject_noise", inject_noise}});
  const std::string what = "AutoencoderKLLTXVideo config: ";
  nn::require_positive("AutoencoderKLLTXVideo", {{"latent_channels", c.latent_channels},
                                                 {"out_channels", c.out_channels},
                                                 {"patch_size", c.patch_size},
                                                 {"patch_size_t", c.patch_size_t}});
  CPDIT_CHECK(c.patch_size_t == 1, unsupported, what, "patch_size_t ", c.patch_size_t,
              " is not supported (every released LTX-Video VAE has 1)");
  CPDIT_CHECK(std::none_of(inject_noise.begin(), inject_noise.end(), [](bool b) { return b; }), unsupported, what,
              "decoder_inject_noise (random noise inside the decoder) is not supported");
  const size_t n = c.decoder_block_out_channels.size();
  CPDIT_CHECK(n >= 1 && c.decoder_layers_per_block.size() == n + 1 && c.decoder_spatio_temporal_scaling.size() == n &&
                  c.upsample_residual.size() == n && c.upsample_factor.size() == n,
              invalid_argument, what, "decoder_block_out_channels (", n, " entries) needs one more "
              "decoder_layers_per_block and as many decoder_spatio_temporal_scaling, upsample_residual and "
              "upsample_factor entries");
  CPDIT_CHECK(c.scaling_factor > 0 && c.resnet_norm_eps > 0, invalid_argument, what,
              "scaling_factor and resnet_norm_eps must be positive");
  for (int64_t layers : c.decoder_layers_per_block)
    CPDIT_CHECK(layers >= 0 && layers <= 1024, invalid_argument, what, "decoder_layers_per_block ", layers,
                " is out of range");
  // Walk the up blocks in decoding order: `width` is diffusers' output_channel, `real` the channel
  // count the activations have.
  int64_t width = c.decoder_block_out_channels.back(), real = width;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = n - 1 - k;  // diffusers reverses the lists
    const int64_t factor = c.upsample_factor[i];
    CPDIT_CHECK(factor == 1 || factor == 2 || factor == 4 || factor == 8, invalid_argument, what,
                "upsample_factor ", factor, " must be 1, 2, 4 or 8");
    const int64_t in = width / factor;
    width = c.decoder_block_out_channels[i] / factor;
    CPDIT_CHECK(width > 0 && width <= (int64_t(1) << 20), invalid_argument, what, "decoder block width ",
                c.decoder_block_out_channels[i], " over upsample_factor ", factor, " is out of range");
    if (in != width) {  // a conv_in ResNet, which takes no timestep in diffusers
      CPDIT_CHECK(real == in && !c.timestep_conditioning, invalid_argument, what, "up block ", k,
                  " cannot take ", real, " channels (diffusers' decoder cannot run this config either)");
      real = width;
    }
    // The upsampler takes width * factor channels and leaves 8 (width * factor) / factor / 8 = width.
    const int64_t wanted = c.decoder_spatio_temporal_scaling[i] ? width * factor : width;
    CPDIT_CHECK(real == wanted, invalid_argument, what, "up block ", k, " cannot take ", real,
                " channels (diffusers' decoder cannot run this config either)");
    real = width;
  }
  return c;
}

}  // namespace cpdit::models::vae
