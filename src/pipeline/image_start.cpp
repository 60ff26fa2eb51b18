#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/pipeline/image_start.hpp>
#include <cpdit/pipeline/wan_image.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace cpdit::pipeline {

namespace k = kernels;

Tensor posterior_sample(const Tensor& moments, int64_t channels, const Tensor& noise) {
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

Tensor image_start_latents(const models::LoadedModel& vae, const Tensor& pixels, const Tensor& noise) {
  CPDIT_CHECK(pixels.dim() == 4 && pixels.size(0) == 1 && pixels.size(1) == 3, invalid_argument,
              "the image to encode is (1, 3, H, W), got ", pixels.describe());
  const auto* kl = std::any_cast<models::vae::KLConfig>(&vae.config);
  if (kl == nullptr) {  // a Wan-layout VAE: the image as a one-frame video
    const Tensor latents =
        wan_video_latents(vae, pixels.contiguous().reshape({1, 3, 1, pixels.size(2), pixels.size(3)}), noise);
    return latents.reshape({1, latents.size(1), latents.size(3), latents.size(4)});
  }
  const std::unique_ptr<nn::Model> model = vae.replica();
  const Tensor moments = dynamic_cast<const models::vae::AutoencoderKL&>(*model).encode(pixels.contiguous());
  const Tensor sample = posterior_sample(moments, kl->latent_channels, noise);
  const Tensor shifted = k::add(sample, Tensor::full({1}, -double(float(kl->shift_factor))));
  return k::mul(shifted, Tensor::full({1}, double(float(kl->scaling_factor))));
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
                           float sigma) {
  const Tensor& latents = image.image_latents;
  const Shape want = shape.unpacked();
  CPDIT_CHECK(latents.dim() == 4 && latents.size(0) == 1 && latents.size(1) == want[1] && latents.size(2) == want[2] &&
                  latents.size(3) == want[3],
              invalid_argument, "the image's latents are ", latents.describe(), "; this run's latents are (1, ",
              want[1], ", ", want[2], ", ", want[3], ")");
  const Tensor batch = repeated_over_batch(latents, want[0]);
  return noised_image_latents(flux_pack(batch).narrow(1, begin, noise.size(1)).contiguous(), noise, sigma);
}

}  // namespace cpdit::pipeline
