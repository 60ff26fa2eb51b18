#pragma once
// FLUX.1 image-to-image (diffusers' FluxImg2ImgPipeline): what the image becomes before the denoising
// loop. generate_flux (FluxGenerateOptions::image) skips the schedule's first steps by `strength` and
// starts from the image's latents noised to the first step it keeps.
#include <cpdit/core/tensor.hpp>
#include <cpdit/models/registry.hpp>

#include <cstdint>

namespace cpdit::pipeline {

struct FluxImageStart {
  Tensor image_latents;   // (1, C, h, w): flux_image_latents'
  double strength = 0.6;  // the share of the schedule run, in (0, 1]; the pipeline's default
};

// The pipeline's _encode_vae_image: `pixels` (1, 3, H, W) from image_pixels through `vae` (a LoadedModel of
// AutoencoderKL; any other VAE is refused in one line), its posterior sampled as mean + exp(0.5 *
// clamp(logvar, -30, 20)) * `noise` (the latents' shape), then (x - shift_factor) * scaling_factor: (1, C,
// H/f, W/f) f32. On this thread, one rank.
Tensor flux_image_latents(const models::LoadedModel& vae, const Tensor& pixels, const Tensor& noise);

// get_timesteps: the steps of a `steps`-step schedule skipped at `strength`, int(max(steps - min(steps x
// strength, steps), 0)). Refuses a strength outside [0, 1] and one that leaves no step to run.
int flux_skipped_steps(int steps, double strength);

// The scheduler's scale_noise at a step of `sigma`: sigma x noise + (1 - sigma) x image_latents, each
// product and the sum rounded to f32 as torch rounds them.
Tensor noised_image_latents(const Tensor& image_latents, const Tensor& noise, float sigma);

}  // namespace cpdit::pipeline
