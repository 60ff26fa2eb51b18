#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::pipeline {

Tensor unscale_kl_latents(const Tensor& latents, const models::vae::KLConfig& config) {
  CPDIT_CHECK(latents.defined() && latents.dim() == 4 && latents.size(1) == config.latent_channels, invalid_argument,
              "AutoencoderKL latents must be unpacked (B, ", config.latent_channels, ", h, w), got ",
              latents.defined() ? latents.describe() : "undefined");
  // One rounding per op, as the pipeline's two tensor ops do it.
  const Tensor scaled = kernels::mul(latents.to(DType::f32), Tensor::full({1}, 1.0 / config.scaling_factor));
  return kernels::add(scaled, Tensor::full({1}, config.shift_factor));
}

Tensor denormalize_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config) {
  const int64_t c = config.z_dim;
  CPDIT_CHECK(latents.defined() && latents.dim() == 5 && latents.size(1) == c, invalid_argument,
              "AutoencoderKLWan latents must be (B, ", c, ", F, h, w), got ",
              latents.defined() ? latents.describe() : "undefined");
  CPDIT_CHECK(int64_t(config.latents_mean.size()) == c && int64_t(config.latents_std.size()) == c, invalid_argument,
              "the VAE config needs latents_mean and latents_std of ", c, " values to denormalise latents");
  std::vector<float> mean(config.latents_mean.begin(), config.latents_mean.end());
  std::vector<float> std(config.latents_std.begin(), config.latents_std.end());
  const Tensor scaled = kernels::mul(latents.to(DType::f32), Tensor::from_vector(std, {c, 1, 1, 1}));
  return kernels::add(scaled, Tensor::from_vector(mean, {c, 1, 1, 1}));
}

Tensor vae_latents(const std::any& vae_config, const Tensor& latents) {
  if (const auto* kl = std::any_cast<models::vae::KLConfig>(&vae_config)) return unscale_kl_latents(latents, *kl);
  if (const auto* wan = std::any_cast<models::vae::WanVaeConfig>(&vae_config))
    return denormalize_wan_latents(latents, *wan);
  fail(ErrorKind::unsupported, "this model is not a VAE cpdit decodes (AutoencoderKL, AutoencoderKLWan, AutoencoderKLQwenImage)");
}

std::vector<uint8_t> sample_to_rgb8(const Tensor& sample_in, int64_t index) {
  CPDIT_CHECK(sample_in.defined() && sample_in.dim() == 4 && sample_in.size(1) == 3, invalid_argument,
              "an image sample must be (B, 3, H, W), got ", sample_in.defined() ? sample_in.describe() : "undefined");
  CPDIT_CHECK(index >= 0 && index < sample_in.size(0), invalid_argument, "image ", index, " of a batch of ",
              sample_in.size(0));
  const Tensor sample = sample_in.to(DType::f32).contiguous();
  const int64_t h = sample.size(2), w = sample.size(3), plane = h * w;
  const float* src = sample.data<float>() + index * 3 * plane;
  std::vector<uint8_t> rgb(size_t(3 * plane));
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < 3; ++c) {
      const float v = std::clamp(src[c * plane + p] / 2.0f + 0.5f, 0.0f, 1.0f);  // NaN -> 0 below
      rgb[size_t(3 * p + c)] = std::isnan(v) ? 0 : uint8_t(std::nearbyint(v * 255.0f));
    }
  return rgb;
}

}  // namespace cpdit::pipeline
