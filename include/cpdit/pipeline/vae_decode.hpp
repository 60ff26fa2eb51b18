#pragma once
// The pipeline's side of decoding: what FLUX.1 and Wan do to latents before their VAE decoder, and
// the image post-processing after it (diffusers' VaeImageProcessor).
#include <cpdit/core/tensor.hpp>
#include <cpdit/models/vae/config.hpp>

#include <any>
#include <cstdint>
#include <vector>

namespace cpdit::pipeline {

// FLUX.1: latents / scaling_factor + shift_factor, (B, C, h, w) unpacked.
Tensor unscale_kl_latents(const Tensor& latents, const models::vae::KLConfig& config);
// Wan: latents * latents_std + latents_mean per channel, (B, C, F, h, w); the config's vectors must
// have C entries.
Tensor denormalize_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config);

// What the pipelines do before their VAE, chosen by the VAE's config (a models::LoadedModel config:
// KLConfig or WanVaeConfig); any other config is refused as not a VAE.
Tensor vae_latents(const std::any& vae_config, const Tensor& latents);

// Item `index` of a decoded sample (B, 3, H, W) in [-1, 1] as 8-bit RGB, row-major: each value
// round(clamp(x / 2 + 0.5, 0, 1) * 255), as diffusers' postprocess does.
std::vector<uint8_t> sample_to_rgb8(const Tensor& sample, int64_t index = 0);

}  // namespace cpdit::pipeline
