#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::pipeline {

namespace k = kernels;

namespace {

// DiagonalGaussianDistribution.sample: the first `channels` of `moments` (dim 1) the mean, the rest the
// log-variance; mean + exp(0.5 * clamp(logvar, -30, 20)) * noise, one f32 rounding per op.
Tensor sampled_posterior(const Tensor& moments, int64_t channels, const Tensor& noise) {
  const Tensor mean = moments.narrow(1, 0, channels).contiguous();
  const Tensor logvar = moments.narrow(1, channels, channels).contiguous();
  CPDIT_CHECK(noise.numel() == mean.numel(), invalid_argument, "the posterior's noise is ", noise.describe(),
              "; the image's latents are ", mean.describe());
  Tensor std = Tensor::empty(logvar.shape());
  const float* lv = logvar.data<float>();
  float* s = std.data<float>();
  for (int64_t i = 0; i < std.numel(); ++i) s[i] = std::exp(0.5f * std::clamp(lv[i], -30.0f, 20.0f));
  return k::add(mean, k::mul(std, noise.to(DType::f32).contiguous().reshape(mean.shape())));
}

}  // namespace

Tensor image_start_latents(const models::LoadedModel& vae, const Tensor& pixels, const Tensor& noise) {
  CPDIT_CHECK(pixels.dim() == 4 && pixels.size(0) == 1 && pixels.size(1) == 3, invalid_argument,
              "the image to encode is (1, 3, H, W), got ", pixels.describe());
  const std::unique_ptr<nn::Model> model = vae.replica();
  if (const auto* kl = std::any_cast<models::vae::KLConfig>(&vae.config)) {
    const Tensor moments = dynamic_cast<const models::vae::AutoencoderKL&>(*model).encode(pixels.contiguous());
    CPDIT_CHECK(noise.shape() == moments.narrow(1, 0, kl->latent_channels).shape(), invalid_argument,
                "the posterior's noise is ", noise.describe(), "; the image's latents are (1, ", kl->latent_channels,
                ", ", moments.size(2), ", ", moments.size(3), ")");
    const Tensor sample = sampled_posterior(moments, kl->latent_channels, noise);
    const Tensor shifted = k::add(sample, Tensor::full({1}, -double(float(kl->shift_factor))));
    return k::mul(shifted, Tensor::full({1}, double(float(kl->scaling_factor))));
  }
  const auto* wan = std::any_cast<models::vae::WanVaeConfig>(&vae.config);
  CPDIT_CHECK(wan, invalid_argument, "image-to-image encodes with an AutoencoderKL or a Wan-layout VAE; the "
              "pipeline's VAE is ", vae.class_name);
  const Tensor video = pixels.contiguous().reshape({1, 3, 1, pixels.size(2), pixels.size(3)});
  const Tensor moments = dynamic_cast<const models::vae::AutoencoderKLWan&>(*model).encode_moments(video);
  CPDIT_CHECK(noise.shape() == Shape({1, wan->z_dim, moments.size(3), moments.size(4)}), invalid_argument,
              "the posterior's noise is ", noise.describe(), "; the image's latents are (1, ", wan->z_dim, ", ",
              moments.size(3), ", ", moments.size(4), ")");
  const Tensor latents = normalize_wan_latents(sampled_posterior(moments, wan->z_dim, noise), *wan);
  return latents.reshape({1, wan->z_dim, moments.size(3), moments.size(4)});
}

int skipped_steps(int steps, double strength) {
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

Tensor noised_image_tokens(const ImageStart& image, const FluxLatentShape& shape, const Tensor& noise, int64_t begin,
                           float sigma, const std::string& size) {
  const Tensor& latents = image.image_latents;
  const Shape want = shape.unpacked();
  CPDIT_CHECK(latents.dim() == 4 && latents.size(0) == 1 && latents.size(1) == want[1] && latents.size(2) == want[2] &&
                  latents.size(3) == want[3],
              invalid_argument, "the image's latents are ", latents.describe(), "; a ", size,
              " image on this model needs (1, ", want[1], ", ", want[2], ", ", want[3], ")");
  const Tensor batch = repeated_over_batch(latents, want[0]);
  return noised_image_latents(flux_pack(batch).narrow(1, begin, noise.size(1)).contiguous(), noise, sigma);
}

}  // namespace cpdit::pipeline
