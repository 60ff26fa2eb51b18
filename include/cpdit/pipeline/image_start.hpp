#pragma once
// Image-to-image (diffusers' FluxImg2ImgPipeline, QwenImageImg2ImgPipeline): what the image becomes before
// the denoising loop. The loops (FluxGenerateOptions::image, QwenImageGenerateOptions::image) skip the
// schedule's first steps by `strength` and start from the image's latents noised to the first step kept.
#include <cpdit/core/tensor.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/latents.hpp>

#include <cstdint>

namespace cpdit::pipeline {

struct ImageStart {
  Tensor image_latents;   // (1, C, h, w): image_start_latents'
  double strength = 0.6;  // the share of the schedule run, in (0, 1]; both pipelines' default
};

// DiagonalGaussianDistribution.sample: the first `channels` of `moments` (dim 1) the mean, the rest the
// log-variance; mean + exp(0.5 * clamp(logvar, -30, 20)) * noise (as many values as the mean), one f32
// rounding per op.
Tensor posterior_sample(const Tensor& moments, int64_t channels, const Tensor& noise);

// The pipelines' _encode_vae_image: `pixels` (1, 3, H, W) from image_pixels through `vae`, its posterior
// sampled as mean + exp(0.5 * clamp(logvar, -30, 20)) * `noise` (the latents' shape, (1, C, h, w)), then
// made what the transformer sees: for an AutoencoderKL (FLUX.1) (x - shift_factor) * scaling_factor, for a
// Wan-layout VAE (Qwen-Image's, which sees the image as one frame) wan_video_latents' normalisation. Any
// other VAE is refused in one line. (1, C, h, w) f32; on this thread, one rank.
Tensor image_start_latents(const models::LoadedModel& vae, const Tensor& pixels, const Tensor& noise);

// get_timesteps: the steps of a `steps`-step schedule skipped at `strength`, int(max(steps - min(steps x
// strength, steps), 0)). Refuses a strength outside [0, 1] and one that leaves no step to run.
int skipped_steps(int steps, double strength);

// The scheduler's scale_noise at a step of `sigma`: sigma x noise + (1 - sigma) x image_latents, each
// product and the sum rounded to f32 as torch rounds them.
Tensor noised_image_latents(const Tensor& image_latents, const Tensor& noise, float sigma);

// The loop's packed start from `image`: tokens [begin, begin + noise's tokens) of flux_pack(image's latents,
// repeated over the batch) noised with `noise` (the same tokens of the seeded noise) at `sigma`. `shape` is
// the run's latents, which the image's latents must match.
Tensor noised_image_tokens(const ImageStart& image, const FluxLatentShape& shape, const Tensor& noise, int64_t begin,
                           float sigma);

}  // namespace cpdit::pipeline
