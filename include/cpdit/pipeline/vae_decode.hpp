#pragma once
// The pipeline's side of decoding: what FLUX.1 and Wan do to latents before their VAE decoder (and Wan
// to latents its encoder made), and the image post-processing after it (diffusers' VaeImageProcessor).
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/models/vae/config.hpp>

#include <nlohmann/json.hpp>

#include <any>
#include <cstdint>
#include <optional>
#include <vector>

namespace cpdit::pipeline {

// FLUX.1: latents / scaling_factor + shift_factor, (B, C, h, w) unpacked.
Tensor unscale_kl_latents(const Tensor& latents, const models::vae::KLConfig& config);
// Wan: latents * latents_std + latents_mean per channel, (B, C, F, h, w); the config's vectors must
// have C entries.
Tensor denormalize_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config);
// The way in, for latents the VAE encoded (SkyReels-V2 image-to-video): (latents - latents_mean) *
// (1 / latents_std) per channel, in f32 as the pipeline computes it.
Tensor normalize_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config);

// What the pipelines do before their VAE, chosen by the VAE's config (a models::LoadedModel config:
// KLConfig or WanVaeConfig); any other config is refused as not a VAE.
Tensor vae_latents(const std::any& vae_config, const Tensor& latents);

// LTXPipeline's decode_timestep and decode_noise_scale, read by a timestep-conditioned LTX-Video VAE
// only: its decoder gets the timestep, and the latents it decodes are mixed with noise,
// (1 - s) x + s noise, after their denormalisation.
struct DecodeTimestep {
  float timestep = 0.0f;             // LTXPipeline's default
  std::optional<float> noise_scale;  // unset: the timestep, as LTXPipeline
  uint64_t seed = 0;                 // the noise: generate's --seed, through a stream of its own ...
  Tensor noise;                      // ... unless given here (e.g. the draw of diffusers' generator)
};

// A frame split is for Wan's video VAE: refused for any other `vae` (a models::LoadedModel) in one line.
void check_vae_split(const models::LoadedModel& vae, models::vae::VideoSplit split);

// The pipeline's decode: the latents prepared as the VAE's pipeline does (vae_latents; LTX-Video:
// the VAE's own latents_mean/std, and `ltx` for a timestep-conditioned one), then `vae` (a LoadedModel
// of a VAE) over the ranks of `world`, its rows split when the world has more than one rank (or, for
// Wan's video VAE with `split` frames, its latent frames). Every rank calls it and gets the whole
// sample (B, 3, H, W) or (B, 3, F, H, W), in [-1, 1], except ranks beyond the latent's row (frame)
// count, which take no part and get an undefined tensor (rank 0 always decodes).
Tensor decode_latents(const models::LoadedModel& vae, const Tensor& latents, comm::Communicator& world,
                      const DecodeTimestep& ltx = {}, models::vae::VideoSplit split = models::vae::VideoSplit::rows);

// The VAE's decoder alone, as diffusers' vae.decode(z): `z` is what the decoder takes (the pipeline's
// unscaling already done, as a diffusers script does it before vae.decode), split over `world` as
// decode_latents does. An LTX-Video VAE that decodes with a timestep is refused.
Tensor decode_vae_input(const models::LoadedModel& vae, const Tensor& z, comm::Communicator& world);

// The VAE's config in diffusers' names (its config.json as the decoder reads it, `_class_name` included):
// what Python's pipe.vae.config shows.
nlohmann::json vae_config_json(const models::LoadedModel& vae);

// diffusers' postprocess to output_type="np": an image sample (B, 3, H, W) becomes (B, H, W, 3), a
// video sample (B, 3, F, H, W) becomes (B, F, H, W, 3), each value clamp(x / 2 + 0.5, 0, 1) in f32.
Tensor postprocess_pixels(const Tensor& sample);

// Picture `index` of pixels (..., H, W, 3) in [0, 1] (the leading dims flattened: image b, or frame
// b·F + f of a video) as 8-bit RGB, row-major: round(x · 255), as diffusers' numpy_to_pil; NaN is 0.
std::vector<uint8_t> pixels_to_rgb8(const Tensor& pixels, int64_t index = 0);

}  // namespace cpdit::pipeline
