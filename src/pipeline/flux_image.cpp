#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/pipeline/flux_image.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::pipeline {

namespace k = kernels;

Tensor flux_image_latents(const models::LoadedModel& vae, const Tensor& pixels, const Tensor& noise) {
  const auto* config = std::any_cast<models::vae::KLConfig>(&vae.config);
  CPDIT_CHECK(config, invalid_argument, "image-to-image encodes its image with an AutoencoderKL; the pipeline's VAE is ",
              vae.class_name);
  CPDIT_CHECK(pixels.dim() == 4 && pixels.size(0) == 1 && pixels.size(1) == config->in_channels, invalid_argument,
              "the image to encode is (1, ", config->in_channels, ", H, W), got ", pixels.describe());
  const std::unique_ptr<nn::Model> model = vae.replica();
  const Tensor moments = dynamic_cast<const models::vae::AutoencoderKL&>(*model).encode(pixels.contiguous());
  const int64_t c = config->latent_channels;
  const Tensor mean = moments.narrow(1, 0, c).contiguous(), logvar = moments.narrow(1, c, c).contiguous();
  CPDIT_CHECK(noise.shape() == mean.shape(), invalid_argument, "the posterior's noise is ", noise.describe(),
              "; the image's latents are ", mean.describe());
  // DiagonalGaussianDistribution: std = exp(0.5 * clamp(logvar)), one f32 rounding per op.
  Tensor std = Tensor::empty(logvar.shape());
  const float* lv = logvar.data<float>();
  float* s = std.data<float>();
  for (int64_t i = 0; i < std.numel(); ++i) s[i] = std::exp(0.5f * std::clamp(lv[i], -30.0f, 20.0f));
  const Tensor sample = k::add(mean, k::mul(std, noise.to(DType::f32)));
  const Tensor shifted = k::add(sample, Tensor::full({1}, -double(float(config->shift_factor))));
  return k::mul(shifted, Tensor::full({1}, double(float(config->scaling_factor))));
}

int flux_skipped_steps(int steps, double strength) {
  CPDIT_CHECK(strength >= 0 && strength <= 1, invalid_argument, "strength must be in [0, 1], got ", strength);
  const double kept = std::min(double(steps) * strength, double(steps));
  const int skipped = int(std::max(double(steps) - kept, 0.0));
  CPDIT_CHECK(skipped < steps, invalid_argument, "strength ", strength, " of ", steps,
              " steps leaves no step to run: raise --strength or --steps");
  return skipped;
}

Tensor noised_image_latents(const Tensor& image_latents, const Tensor& noise, float sigma) {
  CPDIT_CHECK(image_latents.shape() == noise.shape(), invalid_argument, "the image's latents are ",
              image_latents.describe(), ", the noise ", noise.describe());
  return k::add(k::mul(noise.to(DType::f32), Tensor::full({1}, double(sigma))),
                k::mul(image_latents.to(DType::f32), Tensor::full({1}, double(1.0f - sigma))));
}

}  // namespace cpdit::pipeline
